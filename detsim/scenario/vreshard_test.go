package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/scenario"
)

// TestVReshardSeeds: 300 seeds of the vreshard scenario hold every invariant and together
// fire each of its probes; each mutant trips its invariant within 200 seeds.
func TestVReshardSeeds(t *testing.T) {
	probes := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		r := scenario.VReshard.Run(seed, detsim.RunOptions{})
		require.Nil(t, r.Violation, "seed %d: %v", seed, r.Violation)
		for k, v := range r.Probes {
			probes[k] += v
		}
	}
	for _, p := range scenario.VReshard.Probes {
		require.Positive(t, probes[p], "probe %s never fired in 300 seeds", p)
	}
	for _, m := range []struct{ mutant, inv string }{
		{scenario.MutantVReshardSkipVDiff, check.InvVReshardVDiff},
		{scenario.MutantVReshardSkipMirror, check.InvVReshardMirror},
		{scenario.MutantVReshardForgetSent, check.InvVReshardOnce},
		{scenario.MutantVReshardSkipHold, check.InvVReshardHold},
		{scenario.MutantVReshardIgnoreLag, check.InvVReshardWriteStop},
		{scenario.MutantVReshardSkipVerify, check.InvVReshardVerified},
		{scenario.MutantVReshardRewriteSame, check.InvVReshardRecordChanges},
	} {
		caught := false
		for seed := uint64(1); seed <= 200 && !caught; seed++ {
			r := scenario.VReshard.Run(seed, detsim.RunOptions{Mutant: m.mutant})
			caught = r.Violation != nil && r.Violation.Invariant == m.inv
		}
		require.True(t, caught, "mutant %s never tripped %s in 200 seeds", m.mutant, m.inv)
	}
}
