package scenario_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// TestCutoverGraceOutlastsTheCallTimeout: the plain cutover scenario configures the machine
// as cutover.Options.Grace asks, a grace longer than a statement can travel to a retired
// shard (the network's call timeout), so a violation it finds is the machine's and not a
// grace too short to be a valid setting (that one is MutantNoGrace in the held window).
func TestCutoverGraceOutlastsTheCallTimeout(t *testing.T) {
	sc, ok := scenario.ByName("cutover")
	require.True(t, ok)
	for seed := uint64(1); seed <= 40; seed++ {
		r := sc.Run(seed, detsim.RunOptions{})
		i := slices.IndexFunc(r.Options.Params, func(p detsim.Param) bool { return p.Name == "grace_ms" })
		require.GreaterOrEqual(t, i, 0, "seed %d: no grace_ms drawn", seed)
		require.Greater(t, int64(r.Options.Params[i].Value), r.Options.Net.CallTimeout,
			"seed %d: grace %d ms within the call timeout %d ms", seed, r.Options.Params[i].Value, r.Options.Net.CallTimeout)
	}
}
