package vreshard_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/vreshard"
)

// TestOutcomeAndDoneStrings: every outcome has a name of its own, a value outside them
// renders as its number, and a Done line carries a reason only when it has one (make
// mutate: these bounds were checked by the golden scripts' text alone).
func TestOutcomeAndDoneStrings(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range []vreshard.Outcome{vreshard.Completed, vreshard.Cancelled, vreshard.Reversed, vreshard.Refused, vreshard.Failed} {
		s := o.String()
		require.False(t, s == "" || strings.HasPrefix(s, "Outcome(") || seen[s], "outcome %d is %q", o, s)
		seen[s] = true
	}
	require.Equal(t, "Outcome(0)", vreshard.Outcome(0).String())
	require.Equal(t, "Outcome(6)", (vreshard.Failed + 1).String())

	d := vreshard.Done{Outcome: vreshard.Completed, Generation: 4}
	require.NotContains(t, d.String(), "reason=")
	d.Reason = "the record moved"
	require.True(t, strings.HasSuffix(d.String(), " reason=the record moved"), d.String())
}
