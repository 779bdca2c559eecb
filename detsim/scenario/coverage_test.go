package scenario_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
	"loam.dev/router/detsim/simtest"
)

// coverageSeeds are the CI seeds the coverage sweep runs per scenario: fixed, so the test
// is deterministic.
const coverageSeeds = 400

// TestCoverage: over the CI seeds, every probe a scenario declares (its fault points and
// rare paths) fires at least once; an all-green sweep that never took a rare path would
// prove nothing. It prints the firing count of every fault point.
func TestCoverage(t *testing.T) {
	if scenario.MutantBuild {
		t.Skip("skipped: this build bakes a mutant into a machine (run only TestMutants with its tag)")
	}
	if raceEnabled {
		t.Skip("skipped: the coverage sweep runs in the build without -race (go test ./detsim/...)")
	}
	total := map[string]int{}
	for _, sc := range scenario.All() {
		st := simtest.Sweep(sc, 1, coverageSeeds, 0, detsim.RunOptions{}, false)
		require.Nil(t, st.Failed, "seed %d failed; run TestSim with -seed", seedOf(st.Failed))
		for _, p := range sc.Probes {
			require.Positive(t, st.Probes[p], "scenario %s: probe %s never fired over seeds 1..%d", sc.Name, p, coverageSeeds)
		}
		for k, v := range st.Probes {
			if strings.HasPrefix(k, "fault:") {
				total[k] += v
			}
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(total)) {
		fmt.Fprintf(&b, "  %-34s %d\n", strings.TrimPrefix(k, "fault:"), total[k])
	}
	t.Logf("fault point firings over seeds 1..%d of every scenario:\n%s", coverageSeeds, b.String())
}

func seedOf(r *detsim.Result) uint64 {
	if r == nil {
		return 0
	}
	return r.Seed
}

// awaitingMachines are catalogue points no scenario of All() evaluates, and why.
var awaitingMachines = map[string]string{}

// TestCatalogueCovered: every catalogue point is declared (as a point and as a probe) by
// some scenario, or listed as awaiting its machine; a listed point that is covered fails
// too, so the list cannot go stale.
func TestCatalogueCovered(t *testing.T) {
	for _, p := range detsim.Catalogue {
		covered := false
		for _, sc := range scenario.All() {
			if slices.Contains(sc.Points, p.Name) && slices.Contains(sc.Probes, "fault:"+p.Name) {
				covered = true
			}
		}
		_, waits := awaitingMachines[p.Name]
		require.True(t, covered || waits, "fault point %s is neither declared by a scenario nor awaiting one", p.Name)
		require.False(t, covered && waits, "fault point %s is covered now: remove it from awaitingMachines", p.Name)
	}
}
