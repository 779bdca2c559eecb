package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/scenario"
)

// TestExplore enumerates every schedule of each tiny configuration: the correct system must
// be exhausted without a violation, and every mutant of the scenario must be found.
func TestExplore(t *testing.T) {
	for _, sc := range scenario.All() {
		if sc.Tiny == nil {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			res := sc.Explore("", 2, 200_000)
			require.Nil(t, res.Violation, "prefix %v", res.Prefix)
			require.True(t, res.Complete, "not exhausted in %d runs", res.Runs)
			t.Logf("%s: %d distinct states, %d runs (%d cut by the visited set), %v", sc.Name, res.States, res.Runs, res.Pruned, res.Elapsed)
			for _, m := range sc.Mutants {
				mr := sc.Explore(m, 2, 200_000)
				require.NotNil(t, mr.Violation, "mutant %s not found exhaustively", m)
				t.Logf("%s/%s: %s after %d runs", sc.Name, m, mr.Violation.Invariant, mr.Runs)
			}
		})
	}
}
