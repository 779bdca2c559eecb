package scenario_test

import (
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// TestExplore enumerates every schedule of each tiny configuration: the correct system must
// be exhausted without a violation, and every mutant of the scenario must be found.
func TestExplore(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: exhaustive mode runs in the build without -race (go test ./detsim/...)")
	}
	for _, sc := range scenario.All() {
		if sc.Tiny == nil {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			if scenario.MutantBuild {
				// Every run of this build is a mutant's: only the tagged mutants are meaningful.
				for _, m := range sc.TinyMutants {
					if slices.ContainsFunc(taggedMutants, func(x mutant) bool { return x.Mutant == m }) {
						mr := sc.Explore(m, 1, 200_000)
						require.NotNil(t, mr.Violation, "mutant %s not found exhaustively", m)
						t.Logf("%s/%s: %s after %d runs", sc.Name, m, mr.Violation.Invariant, mr.Runs)
					}
				}
				return
			}
			res := sc.Explore("", exploreFaults(sc), 200_000)
			require.Nil(t, res.Violation, "prefix %v", res.Prefix)
			require.True(t, res.Complete, "not exhausted in %d runs", res.Runs)
			t.Logf("%s: %d distinct states, %d runs (%d cut by the visited set), %v", sc.Name, res.States, res.Runs, res.Pruned, res.Elapsed)
			if want, ok := wantStates[sc.Name]; ok {
				require.Equal(t, want, res.States, "distinct states of %s's tiny configuration", sc.Name)
			}
			for _, m := range sc.TinyMutants {
				mr := sc.Explore(m, exploreFaults(sc), 200_000)
				require.NotNil(t, mr.Violation, "mutant %s not found exhaustively", m)
				again := sc.ReplayTiny(m, exploreFaults(sc), mr.Prefix)
				require.NotNil(t, again.Violation, "%s: the counterexample's choices %v do not replay", m, mr.Prefix)
				require.Equal(t, mr.Violation.Invariant, again.Violation.Invariant)
				t.Logf("%s/%s: %s after %d runs", sc.Name, m, mr.Violation.Invariant, mr.Runs)
			}
		})
	}
}

// wantStates pins the distinct-state count of a tiny configuration that models a spec
// whose count is known. fencing is the seed 002 TLA+ model (3 pods, MaxGen 4) with the real
// rollout machine deciding the gates: TLC reported 1,487 distinct states for the seed's
// model, and kernel/fencing's own explorer finds the same number.
var wantStates = map[string]int{"fencing": 1487}

// exploreFaults is the fault budget of the exhaustive test: 2 (the configurations' bound),
// less where the tree takes too long for every test run: push 1 (2 with SIM_EXPLORE_FULL,
// about half a minute), cutover 0 (1 with SIM_EXPLORE_FULL, about 40 s; 2 does not finish
// in 300,000 runs).
func exploreFaults(sc detsim.Scenario) int {
	full := os.Getenv("SIM_EXPLORE_FULL") != ""
	switch sc.Name {
	case "push":
		if full {
			return 2
		}
		return 1
	case "cutover":
		if full {
			return 1
		}
		return 0
	}
	return 2
}

// TestExploreCutoverCrash enumerates the cutover's second tiny configuration with one crash
// of an instance: the designated instance crashing after its CUTOVER swapped it and cleared
// its holds reads as "did not take" once it restarts, and the machine rolls back. With the
// destination fenced until the publish nothing is lost on any schedule; the mutant that
// leaves it writable (the protocol as it was) is found and replays from its choices.
func TestExploreCutoverCrash(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: exhaustive mode runs in the build without -race (go test ./detsim/...)")
	}
	if scenario.MutantBuild {
		t.Skip("skipped: this build bakes a mutant into a machine")
	}
	sc := scenario.CutoverCrash
	res := sc.Explore("", 1, 400_000)
	require.Nil(t, res.Violation, "prefix %v", res.Prefix)
	require.True(t, res.Complete, "not exhausted in %d runs", res.Runs)
	t.Logf("%s: %d distinct states, %d runs (%d cut by the visited set), %v", sc.Name, res.States, res.Runs, res.Pruned, res.Elapsed)
	m := scenario.MutantUnfencedDestination
	mr := sc.Explore(m, 1, 400_000)
	require.NotNil(t, mr.Violation, "mutant %s not found exhaustively in %d runs", m, mr.Runs)
	require.Equal(t, "no-lost-ack", mr.Violation.Invariant)
	again := sc.ReplayTiny(m, 1, mr.Prefix)
	require.NotNil(t, again.Violation, "the counterexample's choices %v do not replay", mr.Prefix)
	require.Equal(t, mr.Violation.Invariant, again.Violation.Invariant)
	t.Logf("%s/%s: %s after %d runs: %v", sc.Name, m, mr.Violation.Invariant, mr.Runs, mr.Violation)
}
