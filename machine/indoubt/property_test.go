//go:build !loam_mutant_indoubt_commit

package indoubt_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

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
