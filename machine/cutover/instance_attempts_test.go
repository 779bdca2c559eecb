package cutover_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
	"loam.dev/router/machine/machinetest"
)

// injectBefore, when set, is asked about every command drive is about to answer, and an
// input it returns is fed first (an operator's decision arriving while the command is out).
var injectBefore func(cutover.Command) cutover.Input

// onIdle, when set, is asked whenever drive has nothing to answer, with the timers pending,
// and an input it returns is fed before any timer fires (an operator's decision while the
// machine waits; onIdle may move the clock on first).
var onIdle func(timers map[string]int64) cutover.Input

// drive runs a cutover of fixture() with plan to its Done, on ctx (nil: a fresh one at 1000
// ms with no Rand). seen sees every command first; reply answers one (nil: the default, a
// success: the copy is task 7, replicating with lag 1, and the instance lists it finished and
// the stream, task 8, replicating), and its answer reaches the machine at ctx.Now+1. Timers
// fire when nothing else is queued. Done() must say the cutover ended only once the Done
// command came, with its outcome.
func drive(t *testing.T, ctx *machine.Ctx, plan cutover.Plan, seen func(cutover.Command), reply func(cutover.Command) cutover.Input) cutover.Done {
	return driveRestarting(t, ctx, plan, seen, reply, nil)
}

// driveRestarting is drive where restart, when set, sees every SetTimer once it is set:
// true stops the daemon there (what is queued and every timer is lost), restores the
// machine from its snapshot and feeds Restarted, on ctx as restart left it (it may move the
// clock on, as a daemon down for a while sees).
func driveRestarting(t *testing.T, ctx *machine.Ctx, plan cutover.Plan, seen func(cutover.Command), reply func(cutover.Command) cutover.Input, restart func(cutover.SetTimer) bool) cutover.Done {
	m := cutover.New()
	if ctx == nil {
		ctx = &machine.Ctx{Now: 1000, Trace: machine.Discard}
	}
	rec := fixture()
	queue := m.On(ctx, cutover.Start{Record: rec, Plan: plan})
	version := rec.Version
	timers := map[string]int64{}
	for steps := 0; steps < 10_000; steps++ {
		var in cutover.Input
		if len(queue) == 0 && onIdle != nil {
			if x := onIdle(timers); x != nil {
				queue = m.On(ctx, x)
				continue
			}
		}
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
			seen(c)
			switch c := c.(type) {
			case cutover.Done:
				o, ended := m.Done()
				require.True(t, ended, "Done() after the Done command")
				require.Equal(t, c.Outcome, o)
				return c
			case cutover.SetTimer:
				timers[c.ID] = c.At
				if restart != nil && restart(c) {
					m = machinetest.RoundTrip(t, m, cutover.Restore)
					queue, timers = m.On(ctx, cutover.Restarted{}), map[string]int64{}
				}
				continue
			case cutover.CancelTimer:
				delete(timers, c.ID)
				continue
			case cutover.Alert:
				continue
			}
			_, ended := m.Done()
			require.False(t, ended, "Done() before the Done command")
			if injectBefore != nil {
				if x := injectBefore(c); x != nil {
					queue = append(queue, m.On(ctx, x)...) // an operator's input, fed before c is answered
				}
			}
			if in = reply(c); in == nil {
				switch c := c.(type) {
				case cutover.WriteRecord:
					version++
					in = cutover.RecordWritten{Step: c.Step, Version: version}
				case cutover.CopyData:
					in = cutover.CopyStarted{Step: c.Step, Task: 7}
				case cutover.PollCopy:
					in = cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: 7, State: cutover.TaskReplicating}, LagBytes: 1}
				case cutover.ListTasks:
					in = cutover.TasksListed{Step: c.Step, Tasks: []cutover.Task{{ID: 7, State: cutover.TaskFinished}, {ID: 8, State: cutover.TaskReplicating}}}
				default:
					in = cutover.Reply{Step: stepOf(c)}
				}
			}
		}
		ctx.Now++
		queue = append(queue, m.On(ctx, in)...)
	}
	t.Fatal("the cutover did not end")
	return cutover.Done{}
}

// pauseWithDown drives a cutover to its pause with pgdog-3 down (every Pause and Reload to
// it fails, everything else succeeds) and returns how many Pause and Reload commands
// pgdog-3 was sent, the retry timers set while the pause was open, and the end.
func pauseWithDown(t *testing.T, instanceAttempts int) (pauses, reloads, retryTimers int, done cutover.Done) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 3, Grace: 10, FinalizeAfter: 10, InstanceAttempts: instanceAttempts}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2", "pgdog-3"}, Role: "app", Publication: "app_pub", Options: opts}
	paused, resumed := false, false
	down := errors.New("unreachable")
	done = drive(t, nil, plan, func(c cutover.Command) {
		if _, ok := c.(cutover.SetTimer); ok && paused && !resumed {
			retryTimers++
		}
	}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.Pause:
			paused = true
			var err error
			if c.Instance == "pgdog-3" {
				pauses++
				err = down
			}
			return cutover.Reply{Step: c.Step, Err: err}
		case cutover.Reload:
			var err error
			if c.Instance == "pgdog-3" {
				reloads++
				err = down
			}
			return cutover.Reply{Step: c.Step, Err: err}
		case cutover.Resume:
			if c.Instance != "pgdog-3" {
				resumed = true
			}
		}
		return nil
	})
	return pauses, reloads, retryTimers, done
}

// TestInstanceAttempts: with InstanceAttempts 1 an instance that does not answer the pause
// or the reload is sent each once and the pause goes on at its first failure, with no
// retry timer inside the pause; by default it is sent Attempts times. The outcome is the
// same: finalized, the instance listed missed and lagging (the fence covered it, and stays).
func TestInstanceAttempts(t *testing.T) {
	p, r, timers, done := pauseWithDown(t, 0)
	require.Equal(t, 3, p, "default: Attempts pauses")
	require.Equal(t, 3, r, "default: Attempts reloads")
	require.NotZero(t, timers)
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, []string{"pgdog-3"}, done.Missed)
	require.Equal(t, []string{"pgdog-3"}, done.Lagging)

	p, r, timers, done1 := pauseWithDown(t, 1)
	require.Equal(t, 1, p)
	require.Equal(t, 1, r)
	require.Zero(t, timers, "no retry waits inside the pause")
	require.Equal(t, done.Outcome, done1.Outcome)
	require.Equal(t, done.Missed, done1.Missed)
	require.Equal(t, done.Lagging, done1.Lagging)
}
