package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// TestKnownIssues pins findings the simulator made that the machines do not handle yet, so
// they stay visible and reproducible. When a fix lands, the test fails: move the scenario
// into All() and delete the entry.
//
// cutover-unguarded: a CUTOVER that took effect on the designated instance (swap applied,
// holds cleared) is rolled back by the machine, which cannot tell it took effect: after the
// instance crashed and restarted no task is listed, and a task that failed after its swap
// (PgDog when saving the config fails, reference/pgdog.md §5, from code reading) reads as
// failed. What the instance wrote to the new shards in between is on no shard the rollback
// serves: acknowledged writes are lost. See scenario.CutoverUnguarded.
func TestKnownIssues(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: runs in the build without -race (go test ./detsim/...)")
	}
	sc := scenario.CutoverUnguarded
	var found *detsim.Result
	for seed := uint64(1); seed <= 500 && found == nil; seed++ {
		r := sc.Run(seed, detsim.RunOptions{})
		if r.Violation != nil {
			found = &r
		}
	}
	require.NotNil(t, found, "cutover-unguarded lost nothing in 500 seeds: if the cutover machine now handles a CUTOVER that took effect and was then reported failed, drop the guard in Cutover, move this scenario's fault into it and delete this entry")
	require.Contains(t, []string{"no-lost-ack", "one-side-serves"}, found.Violation.Invariant)
	require.Positive(t, found.Probes["model.cutover.fail.after_swap"])
	sh := sc.Shrink(*found, 1000)
	t.Logf("known issue reproduced:\n%s", detsim.Report(*found, &sh))

	// The same loss through a crash of the designated instance right after its swap,
	// found by the explorer with one fault.
	res := sc.Explore("", 1, 200_000)
	require.NotNil(t, res.Violation, "the explorer no longer finds a lost write after a crash that follows the swap (%d runs): if fixed, delete this entry", res.Runs)
	require.Equal(t, "no-lost-ack", res.Violation.Invariant)
	r := sc.ReplayTiny("", 1, res.Prefix)
	require.NotNil(t, r.Violation, "the explorer's counterexample must replay from its choices")
	require.Equal(t, "no-lost-ack", r.Violation.Invariant)
	t.Logf("known issue found exhaustively after %d runs (%d states): %v\nchoices %v", res.Runs, res.States, res.Violation, res.Prefix)
}
