//go:build !loam_mutant_indoubt_commit

package indoubt_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine/indoubt"
	"loam.dev/router/machine/machinetest"
)

// (The mutant build, -tags loam_mutant_indoubt_commit, must fail this property; it runs
// TestMutantCommitIsCaught instead.)

// TestMonitorProperties: over random prepares, resolutions, coordinator deaths and
// restarts, failed and lost reads and driver restarts, the monitor only reads, alerts and
// waits; it alerts only transactions older than the threshold; it never decides an
// unchanged alert again or clears one it did not raise; and once everything resolves and
// the sink answers, every alert is cleared and every delivery acknowledged.
func TestMonitorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		require.NoError(t, newWorld(t, machinetest.Rapid(t)).run(rapid.IntRange(1, 120).Draw(t, "steps")))
	})
}

// TestMonitorMutantsAreCaught: each mutant trips the invariant it breaks within 200 seeds
// of the world above, with the checker the simulator's bank scenario runs too.
func TestMonitorMutantsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutant indoubt.Mutant
		want   string
	}{
		{"ResendAcked", indoubt.MutantResendAcked, check.InvDecideOnce},
		{"GroupByShard", indoubt.MutantGroupByShard, check.InvAlertNames},
	} {
		opts := propOpts
		opts.Mutant = tc.mutant
		caught := 0
		for seed := uint64(1); seed <= 200 && caught == 0; seed++ {
			if err := newWorldWith(t, machinetest.Seeded(seed), opts).run(120); err != nil && strings.Contains(err.Error(), tc.want) {
				caught++
				t.Logf("%s caught at seed %d: %v", tc.name, seed, strings.SplitN(err.Error(), "\n", 2)[0])
			}
		}
		require.Positive(t, caught, "%s never tripped %s in 200 seeds", tc.name, tc.want)
	}
}
