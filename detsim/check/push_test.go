package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
)

// TestPushSteps: each of ConfigPush's step invariants is named on the command that breaks
// it, and the protocol's own order passes.
func TestPushSteps(t *testing.T) {
	inv := func(v *detsim.Violation) string {
		if v == nil {
			return ""
		}
		return v.Invariant
	}
	p := check.NewSteps()
	// g3 written and answered, then reloaded; a retry of its own step is no second write.
	require.Nil(t, p.WriteFiles(0, "g3/files", 3, 3, 100))
	require.Nil(t, p.WriteFiles(10, "g3/files", 3, 3, 110))
	require.Equal(t, check.InvReloadAfterFiles, inv(p.Reload(20, "a", 3)), "files not landed yet")
	p.Written(3)
	p.Answered("g3/files")
	require.Nil(t, p.Reload(30, "a", 3))

	require.Equal(t, check.InvFilesOnlyPublished, inv(p.WriteFiles(40, "g5/files", 5, 4, 140)))
	// g5's write is awaited: g6's may not go until it is answered or its deadline passes.
	v := p.WriteFiles(50, "g6/files", 6, 6, 150)
	require.Equal(t, check.InvOneWrite, inv(v))
	require.Contains(t, v.Detail, "[g5/files]")
	require.Nil(t, p.WriteFiles(160, "g7/files", 7, 7, 260), "g5 and g6 are past their deadlines")
	require.Equal(t, check.InvGenerationsIncrease, inv(p.WriteFiles(300, "g4/files", 4, 7, 400)))

	p.Written(7)
	require.Nil(t, p.Reload(310, "a", 7))
	require.Equal(t, check.InvGenerationsIncrease, inv(p.Reload(320, "a", 3)), "a goes back from 7 to 3")
	require.Nil(t, p.Reload(330, "b", 3), "b never had 7")

	// Every generation a WriteFiles named must end; a refusal ends nothing.
	for _, g := range []uint64{3, 5, 6, 7} {
		p.Outcome(g, false)
	}
	p.Outcome(4, true)
	v = p.Ended(500)
	require.Equal(t, check.InvPushEnds, inv(v))
	require.Contains(t, v.Detail, "generation 4")
	p.Outcome(4, false)
	require.Nil(t, p.Ended(500))
}
