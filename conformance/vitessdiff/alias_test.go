package vitessdiff

import (
	"testing"

	"github.com/stretchr/testify/require"
	"vitess.io/vitess/go/vt/topo/topoproto"

	"loam.dev/router/adapters"
)

// FuzzTabletAliasMatchesVitess: adapters.ParseTabletAlias accepts exactly the aliases
// Vitess's own parser (topoproto.ParseTabletAlias, v0.24.4) accepts, reads the same cell
// and uid, and formats them as Vitess's TabletAliasString does.
func FuzzTabletAliasMatchesVitess(f *testing.F) {
	for _, s := range []string{"zone1-0000000100", "zone1-100", "us-east-1a-7", "-1", "a-", "a-4294967295", "a-4294967296",
		"a-00000000000000000001", "a.b_c-1", "a b-1", "a-+1", "a--1", "a-1-", "é-1", "", "0-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ours, err := adapters.ParseTabletAlias(s)
		theirs, verr := topoproto.ParseTabletAlias(s)
		if verr != nil {
			require.Error(t, err, "Vitess refuses %q (%v)", s, verr)
			return
		}
		require.NoError(t, err, "Vitess accepts %q", s)
		require.Equal(t, theirs.GetCell(), ours.Cell)
		require.Equal(t, theirs.GetUid(), ours.UID)
		require.Equal(t, topoproto.TabletAliasString(theirs), ours.String())
	})
}
