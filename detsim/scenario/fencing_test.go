package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// TestFencingKnownIssues pins the simulator's findings about the fencing-key migration that
// the protocol as built does not handle, so they stay visible and reproducible. When one is
// fixed, its entry fails: make the scenario's default the fixed behaviour and delete it.
//
// fencing-late: a request sent by a pod process that was then replaced (upgraded) is still
// executed by the server afterwards. An O or A acquire landing after the fleet moved on
// writes an old lease that C (or B) pods do not see, or bumps only the old counter: T1, T2
// and T3 all break, with the correct scripts and machine. The drain wait of one lease TTL
// covers in-flight requests only if they are faster than it (and the daemon's clock does
// not jump during it).
//
// (fencing-roster, the fleet learnt from the pods' reports only, was fixed: loamrouter takes
// the roster from the deploy system, and the bug is the fencing scenario's mutant
// fencing-roster-from-reports in TestMutants.)
func TestFencingKnownIssues(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: runs in the build without -race (go test ./detsim/...)")
	}
	for _, c := range []struct {
		sc    detsim.Scenario
		seeds int
	}{{scenario.FencingLate, 300}} {
		t.Run(c.sc.Name, func(t *testing.T) {
			var found *detsim.Result
			for seed := uint64(1); seed <= uint64(c.seeds) && found == nil; seed++ {
				r := c.sc.Run(seed, detsim.RunOptions{})
				if r.Violation != nil && r.Violation.Invariant != "converges" {
					found = &r
				}
			}
			require.NotNil(t, found, "%s broke no safety invariant in %d seeds: if fixed, delete this entry", c.sc.Name, c.seeds)
			require.Contains(t, []string{"T1-single-authority", "T2-generations-increase", "T3-one-way-door"}, found.Violation.Invariant)
			sh := c.sc.Shrink(*found, 60)
			t.Logf("known issue reproduced:\n%s", detsim.Report(*found, &sh))
		})
	}
}

// TestNewScenariosDeterministic: a fresh seed of each new scenario gives the same trace hash
// twice, and different seeds give different hashes (the corpus test covers corpus seeds).
func TestNewScenariosDeterministic(t *testing.T) {
	for _, sc := range []detsim.Scenario{scenario.Fencing, scenario.Failover} {
		seen := map[[32]byte]uint64{}
		for seed := uint64(100); seed < 110; seed++ {
			a := sc.Run(seed, detsim.RunOptions{})
			b := sc.Run(seed, detsim.RunOptions{})
			require.Equal(t, a.Hash, b.Hash, "%s seed %d: two runs, two hashes", sc.Name, seed)
			require.Equal(t, a.Steps, b.Steps)
			prev, dup := seen[a.Hash]
			require.False(t, dup, "%s: seeds %d and %d gave the same trace", sc.Name, prev, seed)
			seen[a.Hash] = seed
		}
	}
}
