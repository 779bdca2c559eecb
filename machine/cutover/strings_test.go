package cutover_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// TestCommandStrings: a command's String is what the daemon logs for every step, so each
// field it shows must appear when set and only then, and an Outcome out of range names its
// number rather than panicking or passing for another.
func TestCommandStrings(t *testing.T) {
	require.Equal(t, "finalized", cutover.Finalized.String())
	require.Equal(t, "halted", cutover.Halted.String())
	require.Equal(t, "Outcome(0)", cutover.Outcome(0).String())
	require.Equal(t, "Outcome(6)", cutover.Outcome(6).String())

	rec := fixture()
	rec.State = shardmap.State{Phase: shardmap.Serving}
	require.Equal(t, "WriteRecord step=s expect=3 gen="+strconv.FormatUint(rec.Generation, 10)+" phase="+rec.State.Phase.String(),
		cutover.WriteRecord{Step: "s", Expect: 3, Record: rec}.String(), "no to= or at= when the state has neither")
	moving := rec.Clone()
	moving.State = shardmap.State{Phase: shardmap.CuttingOver, To: 9, Step: shardmap.StepFence}
	require.True(t, strings.HasSuffix(cutover.WriteRecord{Step: "s", Record: moving}.String(), " to=9 at=fence"))

	require.Equal(t, "Done outcome=rolled_back gen=4", cutover.Done{Outcome: cutover.RolledBack, Generation: 4}.String())
	require.Equal(t, "Done outcome=finalized gen=5 reason=r missed=(a,b) unresumed=(c)",
		cutover.Done{Outcome: cutover.Finalized, Generation: 5, Reason: "r", Missed: []string{"a", "b"}, Unresumed: []string{"c"}}.String())
}

// TestOptionDefaults: a zero Options takes the documented defaults; a lag of 999,999 bytes is
// under the default threshold of 1,000,000 (so the first poll pauses), and the catch-up
// deadline is 6 hours after the first CopyData.
func TestOptionDefaults(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 10}}
	deadline, copied, polls, paused := int64(-1), int64(-1), 0, false
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	done := drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.SetTimer:
			if strings.HasSuffix(c.ID, "catchup/deadline") {
				deadline = c.At
			}
		case cutover.CopyData:
			copied = ctx.Now
		case cutover.Pause:
			paused = true
		}
	}, func(c cutover.Command) cutover.Input {
		if p, ok := c.(cutover.PollCopy); ok {
			polls++
			return cutover.CopyPolled{Step: p.Step, Task: cutover.Task{ID: p.Task, State: cutover.TaskReplicating}, LagBytes: 999_999}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, copied+6*3600*1000, deadline, "the default catch-up deadline")
	require.True(t, paused)
	require.Equal(t, 1, polls, "999,999 bytes is under the default lag threshold: the first poll pauses")
}
