package cutover_test

// The tests in this file were written for the mutants gremlins left alive in session 3 of
// machine/cutover's mutation testing (MUTATION.md, "Session 3"): each asserts a behaviour
// that only a golden script pinned before (a log line, an option default, a bound, a
// refusal), so that a change to it fails a semantic test, not just a rewritten golden.

import (
	"encoding/json"
	"errors"
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

// TestOptionDefaults: a zero Options takes the documented defaults: a lag of 999,999 bytes
// is under the default threshold of 1,000,000 (a poll showing 2,000,000 is not, and the
// next poll is 1 s later), the catch-up deadline is 6 hours after the first CopyData, and
// the grace period before the old shards are unfenced is 60 s.
func TestOptionDefaults(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 10}}
	deadline, copied, grace, graceSet, paused := int64(-1), int64(-1), int64(-1), int64(-1), false
	var polls []int64
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	done := drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.SetTimer:
			switch {
			case strings.HasSuffix(c.ID, "catchup/deadline"):
				deadline = c.At
			case strings.HasSuffix(c.ID, "/grace"):
				grace, graceSet = c.At, ctx.Now
			}
		case cutover.CopyData:
			copied = ctx.Now
		case cutover.Pause:
			paused = true
		}
	}, func(c cutover.Command) cutover.Input {
		if p, ok := c.(cutover.PollCopy); ok {
			polls = append(polls, ctx.Now)
			lag := int64(999_999)
			if len(polls) == 1 {
				lag = 2_000_000
			}
			return cutover.CopyPolled{Step: p.Step, Task: cutover.Task{ID: p.Task, State: cutover.TaskReplicating}, LagBytes: lag}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, copied+6*3600*1000, deadline, "the default catch-up deadline")
	require.True(t, paused)
	require.Len(t, polls, 2, "999,999 bytes is under the default lag threshold, 2,000,000 is not")
	require.InDelta(t, 1000, polls[1]-polls[0], 2, "the default PollEvery")
	require.Equal(t, graceSet+60_000, grace, "the default Grace")
}

// TestOptionDefaultRetries: with a zero Options a step is tried 3 times, 500 ms after each
// failure (no ctx.Rand: no jitter). A fence that fails for good then rolls the cutover back.
func TestOptionDefaultRetries(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 10}}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	var sent, failed []int64
	done := drive(t, ctx, plan, func(c cutover.Command) {
		if f, ok := c.(cutover.Fence); ok && f.Shard == "n1" {
			sent = append(sent, ctx.Now)
		}
	}, func(c cutover.Command) cutover.Input {
		if f, ok := c.(cutover.Fence); ok && f.Shard == "n1" {
			failed = append(failed, ctx.Now)
			return cutover.Reply{Step: f.Step, Err: errors.New("permission denied")}
		}
		return nil
	})
	require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
	require.Len(t, sent, 3, "the default Attempts")
	for i := 1; i < len(sent); i++ {
		gap := sent[i] - failed[i-1] // the driver here takes 1 ms to feed an answer and 1 to act on a timer
		require.True(t, gap >= 500 && gap <= 502, "try %d went out %d ms after the failure: want the default RetryAfter, 500 ms", i+1, gap)
	}
}

// TestRebaseBound: a record write met by a harmless rewrite (same generation and phase,
// another backend port) is made again on top of it, at most 8 times; the ninth conflict
// counts as the record changing under the cutover, which at the begin step aborts.
func TestRebaseBound(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 10}}
	stored, writes := fixture(), 0
	done := drive(t, nil, plan, func(cutover.Command) {}, func(c cutover.Command) cutover.Input {
		if w, ok := c.(cutover.WriteRecord); ok {
			writes++
			stored = stored.Clone()
			stored.Version++
			stored.Layout.Shards[0].Backend.Port++
			return cutover.RecordWritten{Step: w.Step, Conflict: stored, Err: errors.New("conflict")}
		}
		return nil
	})
	require.Equal(t, cutover.Aborted, done.Outcome, done.Reason)
	require.Equal(t, 9, writes, "the write and its 8 rebases")
}

// TestUndoRecordConflictStillRolledBack: a rollback whose last record write (back to
// serving) meets another writer's record ends RolledBack, with an alert to set the record
// by hand: every instance and shard is already back on the source layout.
func TestUndoRecordConflictStillRolledBack(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 10, Attempts: 1}}
	alerted := false
	done := drive(t, nil, plan, func(c cutover.Command) {
		if a, ok := c.(cutover.Alert); ok && strings.Contains(a.Reason, "set the record to serving by hand") {
			alerted = true
		}
	}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.Fence:
			return cutover.Reply{Step: c.Step, Err: errors.New("permission denied")}
		case cutover.WriteRecord:
			if strings.Contains(c.Step, "/undo/") {
				other := fixture()
				other.Version, other.Generation = 40, 9
				return cutover.RecordWritten{Step: c.Step, Conflict: other, Err: errors.New("conflict")}
			}
		}
		return nil
	})
	require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
	require.True(t, alerted)
}

// TestRestoreRefusesUnknownStages: Restore takes an idle machine's snapshot (no record),
// and of a started machine's snapshot with its stage changed, it takes only stages the
// machine has: every snapshot it accepts can be fed Restarted without panicking, and a
// stage past the last is refused as unknown.
func TestRestoreRefusesUnknownStages(t *testing.T) {
	idle, err := json.Marshal(cutover.New().Snapshot())
	require.NoError(t, err)
	var s cutover.Snapshot
	require.NoError(t, json.Unmarshal(idle, &s))
	_, err = cutover.Restore(s)
	require.NoError(t, err, "an idle machine has no record to check")

	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	started := startedSnapshot(t, ctx)
	unknown := 0
	for stage := range 64 {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(started, &raw))
		raw["Stage"] = stage
		b, err := json.Marshal(raw)
		require.NoError(t, err)
		var s cutover.Snapshot
		require.NoError(t, json.Unmarshal(b, &s))
		r, err := cutover.Restore(s)
		if err != nil {
			if strings.Contains(err.Error(), "is unknown") {
				unknown++
			}
			continue
		}
		require.NotPanics(t, func() { r.On(ctx, cutover.Restarted{}) }, "stage %d restored", stage)
	}
	require.Positive(t, unknown)
}

// TestResolveListsEveryPoll: a CUTOVER whose answer failed is resolved by listing d's
// tasks; while the copy task is still cutting over, the listing is repeated PollEvery
// later, not at once.
func TestResolveListsEveryPoll(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{PollEvery: 100, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	var listed []int64
	done := drive(t, ctx, plan, func(cutover.Command) {}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.Cutover:
			return cutover.Reply{Step: c.Step, Err: errors.New("timeout (the request may have applied)")}
		case cutover.ListTasks:
			if !strings.Contains(c.Step, "resolve") {
				return nil
			}
			listed = append(listed, ctx.Now)
			if len(listed) < 3 {
				return cutover.TasksListed{Step: c.Step, Tasks: []cutover.Task{{ID: 7, State: cutover.TaskCuttingOver}}}
			}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Len(t, listed, 3)
	for i := 1; i < len(listed); i++ {
		require.InDelta(t, 100, listed[i]-listed[i-1], 3, "listing %d", i+1)
	}
}

// TestTaskStateString: a state past the last names its number.
func TestTaskStateString(t *testing.T) {
	require.Equal(t, "unknown", cutover.TaskUnknown.String())
	require.Equal(t, "TaskState(9)", cutover.TaskState(9).String())
}

// TestRestoreRefusesARecordWriteWithoutItsRecord: a snapshot taken while the begin record
// write is out, edited to lose the record being written, is refused rather than restored
// into a machine that would send a write of nothing.
func TestRestoreRefusesARecordWriteWithoutItsRecord(t *testing.T) {
	b := startedSnapshot(t, &machine.Ctx{Now: 1000, Trace: machine.Discard})
	var s cutover.Snapshot
	require.NoError(t, json.Unmarshal(b, &s))
	_, err := cutover.Restore(s)
	require.NoError(t, err, "the snapshot as taken")
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	require.NotNil(t, raw["Next"], "the begin write is out")
	raw["Next"] = nil
	b, err = json.Marshal(raw)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &s))
	_, err = cutover.Restore(s)
	require.ErrorContains(t, err, "writes a record that is missing")
}

// TestReverseRefusedAtServingStillFinalizes: a Reverse that arrives while the CUTOVER is
// out is taken once the CUTOVER takes (the point of no return passed with it pending). If
// d then restarted, the check finds no stream, so the Reverse is refused at serving with an
// alert. The finalize-after timer the pending decision kept from being set is set then, and
// the cutover finalizes FinalizeAfter later, not at once and not never.
func TestReverseRefusedAtServingStillFinalizes(t *testing.T) {
	done, refusedAt, finalizeAt := reverseRefusedAtServing(t, 5000, func(*machine.Ctx, int64, map[string]int64) cutover.Input { return nil })
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.GreaterOrEqual(t, finalizeAt-refusedAt, int64(5000), "finalized FinalizeAfter after the refusal")
}

// TestLateCopyAnswerDuringRetryAlerts: the first COPY_DATA timed out and was retried; its
// success arrives while the retry is out. PgDog starts a task for every COPY_DATA (its
// admin/copy_data.rs runs one per command, and a slot that exists is reused), so the first
// try's task is a second copy that nothing will stop. The machine says so.
func TestLateCopyAnswerDuringRetryAlerts(t *testing.T) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 3, Grace: 10, FinalizeAfter: 10}}
	first := ""
	injectBefore = func(c cutover.Command) cutover.Input {
		if cd, ok := c.(cutover.CopyData); ok && first != "" && cd.Step != first {
			return cutover.CopyStarted{Step: first, Task: 5} // the first try's answer, late
		}
		return nil
	}
	defer func() { injectBefore = nil }()
	alerted := false
	done := drive(t, nil, plan, func(c cutover.Command) {
		if a, ok := c.(cutover.Alert); ok && strings.Contains(a.Reason, "COPY_DATA task 5") {
			alerted = true
		}
	}, func(c cutover.Command) cutover.Input {
		if cd, ok := c.(cutover.CopyData); ok && first == "" {
			first = cd.Step
			return cutover.CopyStarted{Step: cd.Step, Err: errors.New("timeout (the request may have applied)")}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.True(t, alerted, "the first try's task is named in an alert")
}

// startedSnapshot is the JSON snapshot of a machine just started on fixture(): its begin
// record write is out.
func startedSnapshot(t *testing.T, ctx *machine.Ctx) []byte {
	m := cutover.New()
	m.On(ctx, cutover.Start{Record: fixture(), Plan: cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	b, err := json.Marshal(m.Snapshot())
	require.NoError(t, err)
	return b
}

// reverseRefusedAtServing drives TestReverseRefusedAtServingStillFinalizes's cutover (a
// Reverse taken at the point of no return, refused at serving because d restarted and lost
// the stream back) with finalizeAfter, idle answering while the machine waits (onIdle), and
// returns the Done, when the first refusal came and when the cutover began to finalize.
func reverseRefusedAtServing(t *testing.T, finalizeAfter int64, idle func(ctx *machine.Ctx, refusedAt int64, timers map[string]int64) cutover.Input) (done cutover.Done, refusedAt, finalizeAt int64) {
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: finalizeAfter}}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	injectBefore = func(c cutover.Command) cutover.Input {
		if _, ok := c.(cutover.Cutover); ok {
			return cutover.Reverse{}
		}
		return nil
	}
	refusedAt, finalizeAt = -1, -1
	onIdle = func(timers map[string]int64) cutover.Input {
		if refusedAt < 0 || finalizeAt >= 0 {
			return nil
		}
		return idle(ctx, refusedAt, timers)
	}
	defer func() { injectBefore, onIdle = nil, nil }()
	done = drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.Alert:
			if strings.HasPrefix(c.Reason, "Reverse refused") && refusedAt < 0 {
				refusedAt = ctx.Now
			}
		case cutover.StopTask, cutover.Unfence:
			if refusedAt >= 0 && finalizeAt < 0 {
				finalizeAt = ctx.Now
			}
		}
	}, func(c cutover.Command) cutover.Input {
		if l, ok := c.(cutover.ListTasks); ok && strings.Contains(l.Step, "/check/") {
			return cutover.TasksListed{Step: l.Step} // d restarted: the stream back is gone
		}
		return nil
	})
	require.GreaterOrEqual(t, refusedAt, int64(0), "the Reverse taken at the point of no return is refused for want of a stream")
	return done, refusedAt, finalizeAt
}

// TestReverseRefusedWithoutFinalizeAfterWaitsForTheOperator: with FinalizeAfter 0 (no
// finalize on its own), a Reverse refused at serving leaves the machine waiting for the
// operator with no timer: it finalizes when told, not at once.
func TestReverseRefusedWithoutFinalizeAfterWaitsForTheOperator(t *testing.T) {
	told := int64(-1)
	done, _, finalizeAt := reverseRefusedAtServing(t, 0, func(ctx *machine.Ctx, _ int64, timers map[string]int64) cutover.Input {
		if len(timers) > 0 || told >= 0 {
			return nil
		}
		ctx.Now += 60_000 // the operator takes a minute
		told = ctx.Now
		return cutover.Finalize{}
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.GreaterOrEqual(t, told, int64(0), "the machine finalized before the operator said so")
	require.GreaterOrEqual(t, finalizeAt, told, "finalized once told")
}

// TestReverseRefusedTwiceKeepsTheFinalizeTime: a second Reverse, refused like the first
// while the finalize-after timer the first refusal set is pending, does not set it again:
// the cutover finalizes FinalizeAfter after the first refusal, not after the second.
func TestReverseRefusedTwiceKeepsTheFinalizeTime(t *testing.T) {
	again := int64(-1)
	done, refusedAt, finalizeAt := reverseRefusedAtServing(t, 5000, func(ctx *machine.Ctx, refusedAt int64, timers map[string]int64) cutover.Input {
		if again >= 0 || len(timers) == 0 {
			return nil
		}
		ctx.Now = refusedAt + 2000
		again = ctx.Now
		return cutover.Reverse{}
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.GreaterOrEqual(t, again, int64(0), "the second Reverse was sent")
	require.GreaterOrEqual(t, finalizeAt, refusedAt+5000, "finalized FinalizeAfter after the first refusal")
	require.Less(t, finalizeAt, again+5000, "finalized by the timer the first refusal (at %d) set, not by one the second (at %d) set again", refusedAt, again)
}

// TestRestoreRefusesAFenceOfAShardTheLayoutLacks: a snapshot whose fence op names a shard
// by an index its layout does not have (hand-edited, or from another record) is refused
// with an error, never indexed out of range; the same op naming a shard the layout has
// restores.
func TestRestoreRefusesAFenceOfAShardTheLayoutLacks(t *testing.T) {
	b := startedSnapshot(t, &machine.Ctx{Now: 1000, Trace: machine.Discard})
	withFence := func(side, index int, target string) cutover.Snapshot {
		var raw map[string]any
		require.NoError(t, json.Unmarshal(b, &raw))
		ops := raw["Ops"].([]any)
		require.Len(t, ops, 1, "the begin write is the one op out")
		op := ops[0].(map[string]any)
		op["Kind"], op["Side"], op["Index"], op["Target"] = 6, side, index, target // a Fence (kFence) out
		out, err := json.Marshal(raw)
		require.NoError(t, err)
		var s cutover.Snapshot
		require.NoError(t, json.Unmarshal(out, &s))
		return s
	}
	_, err := cutover.Restore(withFence(1, 1, "s1"))
	require.NoError(t, err, "a fence of source shard 1, s1")
	_, err = cutover.Restore(withFence(2, 3, "n3"))
	require.NoError(t, err, "a fence of target shard 3, n3")
	for _, c := range []struct {
		side, index int
		target      string
	}{{1, 2, "s2"}, {1, -1, "s0"}, {1, 0, "s1"}, {2, 4, "n4"}, {1, 3, "n3"}} {
		_, err := cutover.Restore(withFence(c.side, c.index, c.target))
		require.ErrorContains(t, err, "which the layout does not have", "side %d index %d %s", c.side, c.index, c.target)
	}
}
