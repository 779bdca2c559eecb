package cutover_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// TestLaggingSaysWhatTheWorldShows: the designated instance restarted after its CUTOVER (the
// check finds no stream) and its reload then failed, so it is listed lagging; finalize's
// reload of it succeeds, so it is on the published generation's files after all: Done must
// not claim it lagging, and the old shards are opened (the fence is not kept for it).
func TestLaggingSaysWhatTheWorldShows(t *testing.T) {
	m := cutover.New()
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}
	rec := fixture()
	queue := m.On(ctx, cutover.Start{Record: rec, Plan: cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"},
		Role: "app", Publication: "app_pub", Options: opts}})
	version := rec.Version
	timers := map[string]int64{}
	unfencedSource := 0
	for steps := 0; steps < 10_000; steps++ {
		var in cutover.Input
		if len(queue) == 0 {
			id, at := "", int64(0)
			for k, v := range timers {
				if id == "" || v < at {
					id, at = k, v
				}
			}
			require.NotEmpty(t, id, "stuck: nothing to answer and no timer")
			delete(timers, id)
			ctx.Now = max(ctx.Now, at)
			in = cutover.TimerFired{ID: id}
		} else {
			c := queue[0]
			queue = queue[1:]
			switch c := c.(type) {
			case cutover.Done:
				require.Equal(t, cutover.Finalized, c.Outcome, c.Reason)
				require.Empty(t, c.Lagging, "pgdog-1 reloaded the published generation at finalize")
				require.NotZero(t, unfencedSource, "the old shards stay fenced for an instance that is not lagging")
				return
			case cutover.SetTimer:
				timers[c.ID] = c.At
				continue
			case cutover.CancelTimer:
				delete(timers, c.ID)
				continue
			case cutover.Alert:
				continue
			case cutover.WriteRecord:
				version++
				in = cutover.RecordWritten{Step: c.Step, Version: version}
			case cutover.CopyData:
				in = cutover.CopyStarted{Step: c.Step, Task: 7}
			case cutover.PollCopy:
				in = cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: 7, State: cutover.TaskReplicating}, LagBytes: 1}
			case cutover.ListTasks:
				tasks := []cutover.Task{{ID: 7, State: cutover.TaskFinished}, {ID: 8, State: cutover.TaskReplicating}}
				if strings.Contains(c.Step, "/check/") {
					tasks = nil // restarted: its tasks, the reverse stream with them, are gone
				}
				in = cutover.TasksListed{Step: c.Step, Tasks: tasks}
			case cutover.Reload:
				var err error
				if strings.Contains(c.Step, "/check/reload/") {
					err = errors.New("unreachable")
				}
				in = cutover.Reply{Step: c.Step, Err: err}
			case cutover.Unfence:
				if strings.Contains(c.Step, "/unfence/") {
					unfencedSource++
				}
				in = cutover.Reply{Step: c.Step}
			default:
				in = cutover.Reply{Step: stepOf(c)}
			}
		}
		ctx.Now++
		queue = append(queue, m.On(ctx, in)...)
	}
	t.Fatal("the cutover did not end")
}
