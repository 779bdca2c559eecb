package cutover_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// finalUnfenceFailing drives a cutover with Attempts 3 and retryAfter to Finalized, the first
// source shard's final Unfence (a persistent op: it is retried until it succeeds) failing
// fails times. It returns
// how many of those failures had been answered when each Alert naming that Unfence was
// raised, and the delay from each failure to the retry timer it set.
func finalUnfenceFailing(t *testing.T, rnd *rand.Rand, retryAfter int64, fails int) (alertedAfter []int, delays []int64) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: retryAfter, Attempts: 3, Grace: 10, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard, Rand: rnd}
	shard, step := "", "" // the failing Unfence: its shard and its step (the first attempt's id)
	failed, failedAt := 0, int64(0)
	done := drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.Alert:
			if step != "" && c.Step == step {
				alertedAfter = append(alertedAfter, failed)
			}
		case cutover.SetTimer:
			if step != "" && c.ID == "retry:"+step {
				delays = append(delays, c.At-failedAt)
			}
		}
	}, func(c cutover.Command) cutover.Input {
		u, ok := c.(cutover.Unfence)
		if !ok || !strings.Contains(u.Step, "/unfence/") {
			return nil
		}
		if shard == "" {
			shard, step = u.Shard, u.Step
		}
		if u.Shard != shard || failed == fails {
			return nil
		}
		failed++
		failedAt = ctx.Now + 1
		return cutover.Reply{Step: u.Step, Err: errors.New("connection refused")}
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, fails, failed, "every failure was retried")
	return alertedAfter, delays
}

// TestPersistentRetryAlertsOnItsAttemptsthFailure: an op that must be retried until it
// succeeds raises one Alert, on its Attempts-th failure: not before (a false alarm while
// its ordinary retries are still running) and not later (an operator left unwarned).
func TestPersistentRetryAlertsOnItsAttemptsthFailure(t *testing.T) {
	alerted, _ := finalUnfenceFailing(t, nil, 1000, 2)
	require.Empty(t, alerted, "2 failures of 3 attempts raise no Alert")
	alerted, _ = finalUnfenceFailing(t, nil, 1000, 7)
	require.Equal(t, []int{3}, alerted, "one Alert, on the 3rd failure")
}

// TestRetriesJittered: with ctx.Rand the retries of a failing op wait RetryAfter to
// 1.5 × RetryAfter (both included), spread (ops failing together do not retry in step); without it each
// waits exactly RetryAfter.
func TestRetriesJittered(t *testing.T) {
	_, delays := finalUnfenceFailing(t, rand.New(rand.NewPCG(7, 8)), 1000, 20)
	require.Len(t, delays, 20)
	distinct := map[int64]bool{}
	for _, d := range delays {
		require.True(t, d >= 1000 && d <= 1500, "retry %d ms after the failure", d)
		distinct[d] = true
	}
	require.Greater(t, len(distinct), 5, "20 retries drew %d distinct delays", len(distinct))

	_, delays = finalUnfenceFailing(t, nil, 1000, 5)
	require.Equal(t, []int64{1000, 1000, 1000, 1000, 1000}, delays)

	// The spread reaches both ends: at RetryAfter 4, 30 retries wait 4, 5 and 6 ms.
	_, delays = finalUnfenceFailing(t, rand.New(rand.NewPCG(7, 8)), 4, 30)
	distinct = map[int64]bool{}
	for _, d := range delays {
		distinct[d] = true
	}
	require.Equal(t, map[int64]bool{4: true, 5: true, 6: true}, distinct)
}

// lateRetryOfFence is the world where a retry must not reuse its step (issue 20: "retry
// reuses a step"). The first Fence of source shard 0 times out without landing (an answer
// is final: it never will); the machine retries it, and the retry is slow: it stays in
// flight. Meanwhile attempt 1's answer is handed to the machine a second time (a driver that
// restarted re-delivers, or the network repeats it). Under its own step id that answer says
// nothing about the retry. The retry then lands, after the first Unfence of the shard if
// the machine sent one. It returns the Done and the world's violations.
func lateRetryOfFence(t *testing.T, mutants cutover.Mutants) (cutover.Done, []string) {
	var first cutover.Input // attempt 1's answer
	var held cutover.Command
	land := func(w *world, feed func(cutover.Input)) {
		feed(w.apply(held, nil, false))
		held = nil
	}
	isShard0 := func(w *world, shard string) bool { return shard == w.src[0] }
	done, violations, _, _ := reliableWith(t, worldRun{decision: cutover.Finalize{}, mutants: mutants,
		deliver: func(w *world, c cutover.Command, feed func(cutover.Input)) bool {
			switch c := c.(type) {
			case cutover.Fence:
				switch {
				case !isShard0(w, c.Shard):
				case first == nil:
					first = w.apply(c, errors.New("call timed out"), false)
					feed(first)
					return true
				case held == nil:
					held = c
					feed(first)
					return true
				}
			case cutover.Unfence:
				if held != nil && isShard0(w, c.Shard) {
					feed(w.apply(c, nil, false))
					land(w, feed)
					return true
				}
			}
			return false
		},
		idle: func(w *world, feed func(cutover.Input)) bool {
			if held == nil {
				return false
			}
			land(w, feed)
			return true
		},
	})
	require.NotNil(t, first, "the world never met the source shard's Fence")
	return done, violations
}

// TestRetryHasItsOwnStep: each attempt of a step has its own id, and only the answer of
// the attempt in flight settles it. With the retry's own id the repeated answer of attempt
// 1 is ignored, the retry's success fences the shard and the cutover finalizes with every
// invariant kept. Reusing the first attempt's id (the RetryReusesStep mutant) takes that
// answer for the retry's: the fence fails, the rollback unfences the shard, and the retry,
// still in flight, lands after the Unfence: the rollback ends with a source shard fenced,
// the instances resumed onto it, and every write to it refused.
func TestRetryHasItsOwnStep(t *testing.T) {
	done, violations := lateRetryOfFence(t, cutover.Mutants{})
	require.Empty(t, violations)
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)

	done, violations = lateRetryOfFence(t, cutover.Mutants{RetryReusesStep: true})
	require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
	want := []string{"fenced=true, want false", "resumed while shard"}
	for _, s := range want {
		require.True(t, slices.ContainsFunc(violations, func(v string) bool { return strings.Contains(v, s) }), "no violation %q in %q", s, violations)
	}
}

// TestCutoverTriedAttemptsTimes: a CUTOVER that fails and did not take (its copy task still
// replicating) is tried again, Attempts times in all, each try under its own step id, and
// then the cutover rolls back saying so: the instances are not held for ever.
func TestCutoverTriedAttemptsTimes(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 3, Grace: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	steps := map[string]bool{}
	done := drive(t, nil, plan, func(cutover.Command) {}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.Cutover:
			steps[c.Step] = true
			return cutover.Reply{Step: c.Step, Err: errors.New("58000 cutover failed")}
		case cutover.ListTasks:
			if len(steps) > 0 {
				return cutover.TasksListed{Step: c.Step, Tasks: []cutover.Task{{ID: 7, State: cutover.TaskReplicating}}}
			}
		}
		return nil
	})
	require.Len(t, steps, 3, "3 tries, each its own step: %v", steps)
	require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
	require.Contains(t, done.Reason, "did not take after 3 attempts")
}

// TestWaitsLastTheirOptions: finalize on its own starts (stopping the reverse stream) no
// sooner than FinalizeAfter after the last instance resumed, and the old shards are
// unfenced no sooner than Grace after the stream was stopped (the simulator's
// cutover-windows world, window held, shows a statement of a stale router landing without
// the grace).
func TestWaitsLastTheirOptions(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 7000, FinalizeAfter: 5000}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	var resumed, stopped, unfenced int64
	done := drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.Resume:
			resumed = ctx.Now
		case cutover.StopTask:
			stopped = ctx.Now
		case cutover.Unfence:
			if strings.Contains(c.Step, "/unfence/") && unfenced == 0 {
				unfenced = ctx.Now
			}
		}
	}, func(cutover.Command) cutover.Input { return nil })
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.NotZero(t, resumed)
	require.GreaterOrEqual(t, stopped-resumed, opts.FinalizeAfter, "finalize began %d ms after the resume", stopped-resumed)
	require.GreaterOrEqual(t, unfenced-stopped, opts.Grace, "the old shards opened %d ms after the stream stopped", unfenced-stopped)
}

// TestStuckCutoverAlertsEveryStuckPolls: a CUTOVER whose answer failed and whose task stays
// cutting over is listed again and again; the 20th listing raises one Alert that counts
// them, and the 40th another (every instance is held meanwhile), until the task finishes.
// Each is what the listing it was raised on said (check.StuckAlert, the simulator's
// cutover-stuck-alert), and the same alert held against a listing that said finished is
// a false alarm.
func TestStuckCutoverAlertsEveryStuckPolls(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	failed, listings := false, 0
	var stuck []cutover.Alert
	listed := map[string][]cutover.Task{}
	done := drive(t, nil, plan, func(c cutover.Command) {
		if a, ok := c.(cutover.Alert); ok && strings.Contains(a.Reason, "is still") {
			stuck = append(stuck, a)
		}
	}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.Cutover:
			failed = true
			return cutover.Reply{Step: c.Step, Err: errors.New("canceling statement due to statement timeout")}
		case cutover.ListTasks:
			if failed && listings < 45 {
				listings++
				listed[c.Step] = []cutover.Task{{ID: 7, State: cutover.TaskCuttingOver}}
				return cutover.TasksListed{Step: c.Step, Tasks: listed[c.Step]}
			}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Len(t, stuck, 2, "%v", stuck)
	require.Contains(t, stuck[0].Reason, "after 20 listings")
	require.Contains(t, stuck[1].Reason, "after 40 listings")
	for _, a := range stuck {
		require.Nil(t, check.StuckAlert(0, a.Step, a.Reason, listed))
		v := check.StuckAlert(0, a.Step, a.Reason, map[string][]cutover.Task{a.Step: {{ID: 7, State: cutover.TaskFinished}}})
		require.NotNil(t, v, "the alert's wording is the one the checker reads")
		require.Equal(t, check.InvStuckAlert, v.Invariant)
	}
}

// TestLateCopyAfterTheUndoIsAlerted: every COPY_DATA try fails, so the cutover gives up
// and rolls back; the success of one of those tries arrives while the undo writes the
// record back, after its stop stage. The undo cannot stop that task any more: an Alert must
// name it for the operator to stop.
func TestLateCopyAfterTheUndoIsAlerted(t *testing.T) {
	late, alerted := false, false
	done, _, _, _ := reliableWith(t, worldRun{decision: cutover.Finalize{}, failing: "app/4/copy/*",
		deliver: func(w *world, c cutover.Command, feed func(cutover.Input)) bool {
			if wr, ok := c.(cutover.WriteRecord); ok && strings.Contains(wr.Step, "/undo/record") && !late {
				late = true
				before := w.alerts
				feed(cutover.CopyStarted{Step: "app/4/copy/pgdog-1", Task: 9})
				alerted = w.alerts > before
			}
			return false
		}})
	require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
	require.True(t, late, "the undo never wrote the record back")
	require.True(t, alerted, "no Alert for the task the late COPY_DATA started")
}

// TestCopyTaskEndedBeforeCutover: a copy task found finished or cutting over while catching
// up was moved by a CUTOVER (only CUTOVER finishes one), so the designated instance's
// routing may have moved: the rollback reloads it. A failed poll is tried again PollEvery
// later, not at once.
func TestCopyTaskEndedBeforeCutover(t *testing.T) {
	for _, st := range []cutover.TaskState{cutover.TaskFinished, cutover.TaskCuttingOver} {
		opts := cutover.Options{PollEvery: 400, RetryAfter: 50, Attempts: 2, Grace: 10}
		plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
		ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
		polls, reloads := 0, 0
		var failedAt, retriedAt int64
		done := drive(t, ctx, plan, func(c cutover.Command) {
			if _, ok := c.(cutover.PollCopy); ok && polls == 1 {
				retriedAt = ctx.Now
			}
		}, func(c cutover.Command) cutover.Input {
			switch c := c.(type) {
			case cutover.PollCopy:
				polls++
				if polls == 1 {
					failedAt = ctx.Now + 1
					return cutover.CopyPolled{Step: c.Step, Err: errors.New("connection reset")}
				}
				return cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: 7, State: st}, LagBytes: -1}
			case cutover.Reload:
				if strings.Contains(c.Step, "/undo/reload/") {
					reloads++
				}
			}
			return nil
		})
		require.Equal(t, cutover.RolledBack, done.Outcome, done.Reason)
		require.Equal(t, 1, reloads, "task %v: the rollback reloads pgdog-1", st)
		require.GreaterOrEqual(t, retriedAt-failedAt, opts.PollEvery, "the failed poll was tried again %d ms later", retriedAt-failedAt)
	}
}

// TestReverseStepsPersist: past its CUTOVER a reverse cannot go back, so its steps that
// finish the old layout's serving (the publish, opening the old shards, the files) retry
// until they succeed, with one Alert once they have failed Attempts times; only its STOP of
// the stream its own CUTOVER started gives up after Attempts (the new layout is fenced and
// the stream stopping or not loses nothing), with an Alert, and the reverse ends Reversed.
func TestReverseStepsPersist(t *testing.T) {
	for _, step := range []string{"*/reverse1/publish*", "*/reverse1/open/s0*", "*/reverse1/files*"} {
		failed := 0
		var w0 *world
		done, violations, _, _ := reliableWith(t, worldRun{decision: cutover.Reverse{},
			setup: func(w *world) { w0 = w },
			deliver: func(w *world, c cutover.Command, feed func(cutover.Input)) bool {
				if failed < 3 && glob(step, stepOf(c)) { // Attempts is 2: one try past them
					failed++
					feed(w.apply(c, errors.New("unreachable"), false))
					return true
				}
				return false
			}})
		require.Equal(t, 3, failed, step)
		require.Empty(t, violations, step)
		require.Equal(t, cutover.Reversed, done.Outcome, "%s: %s", step, done.Reason)
		require.Equal(t, 1, w0.alerts, "%s: one Alert once it failed Attempts times", step)
	}
	var w0 *world
	done, violations, _, _ := reliableWith(t, worldRun{decision: cutover.Reverse{}, failing: "*/reverse1/stop/*",
		setup: func(w *world) { w0 = w }})
	require.Empty(t, violations)
	require.Equal(t, cutover.Reversed, done.Outcome, done.Reason)
	require.Equal(t, 1, w0.alerts, "the STOP that gave up raises an Alert")
}

// TestReverseSettleOrder: Options.ReverseSettle, when positive, makes a reverse reload the
// instances onto the old layout before it opens it, and open it only ReverseSettle ms after
// the last reload; zero keeps the order without it (open, then reload) and waits nothing.
func TestReverseSettleOrder(t *testing.T) {
	for _, settle := range []int64{0, 1, 3000} {
		var order []string
		var reloaded, opened int64 = -1, -1
		done, violations, _, _ := reliableWith(t, worldRun{decision: cutover.Reverse{}, settle: settle,
			deliver: func(w *world, c cutover.Command, feed func(cutover.Input)) bool {
				switch s := stepOf(c); {
				case strings.Contains(s, "/reverse1/reload/"):
					order = append(order, "reload")
					reloaded = w.now()
				case strings.Contains(s, "/reverse1/open/"):
					order = append(order, "open")
					if opened < 0 {
						opened = w.now()
					}
				}
				return false
			}})
		require.Empty(t, violations, "settle %d", settle)
		require.Equal(t, cutover.Reversed, done.Outcome, "settle %d: %s", settle, done.Reason)
		want := []string{"reload", "reload", "reload", "open", "open"}
		if settle == 0 {
			want = []string{"open", "open", "reload", "reload", "reload"}
		}
		require.Equal(t, want, order, "settle %d", settle)
		if settle > 0 {
			require.GreaterOrEqual(t, opened-reloaded, settle, "settle %d: opened %d ms after the last reload", settle, opened-reloaded)
		}
	}
}

// TestGraceWaitedOutAgainAfterRestart: a restart in the grace waits the whole grace out
// again from the restart (the deadline is on the wall clock, which may have jumped forward
// while no process ran), so the old shards are unfenced no sooner than Grace after the
// restart, whether the clock moved on by a millisecond or by an hour (past the deadline the
// snapshot holds). GraceFromSnapshot's world in the simulator is cutover-windows with
// grace_restart; this is the same rule on the machine alone.
func TestGraceWaitedOutAgainAfterRestart(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 7000, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	for _, jump := range []int64{1, 3_600_000} {
		ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
		var restarted, unfenced int64
		done := driveRestarting(t, ctx, plan, func(c cutover.Command) {
			if c, ok := c.(cutover.Unfence); ok && strings.Contains(c.Step, "/unfence/") && unfenced == 0 {
				unfenced = ctx.Now
			}
		}, func(cutover.Command) cutover.Input { return nil }, func(c cutover.SetTimer) bool {
			if !strings.HasSuffix(c.ID, "/grace") || restarted != 0 {
				return false
			}
			ctx.Now += jump // the daemon stops here and starts again jump ms later
			restarted = ctx.Now
			return true
		})
		require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
		require.NotZero(t, restarted, "restarted in the grace")
		require.GreaterOrEqual(t, unfenced-restarted, opts.Grace, "jump %d: the old shards opened %d ms after the restart", jump, unfenced-restarted)
	}
}

// TestFenceKeptAlertNamesWhoNeverReloaded: an instance whose every RELOAD fails keeps the
// old shards fenced, and the alert that says so names it, and only it: check.FenceKeptAlert
// (the simulator's and the world test's cutover-claims for this alert) accepts it against
// the answers the instances gave, and finds it false had that instance's RELOAD been
// answered OK.
func TestFenceKeptAlertNamesWhoNeverReloaded(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2", "pgdog-3"}, Role: "app", Publication: "app_pub", Options: opts}
	answers := map[string]check.Answered{}
	var kept []string
	done := drive(t, nil, plan, func(c cutover.Command) {
		if a, ok := c.(cutover.Alert); ok && strings.HasPrefix(a.Reason, "fence kept") {
			kept = append(kept, a.Reason)
		}
	}, func(c cutover.Command) cutover.Input {
		if r, ok := c.(cutover.Reload); ok {
			var err error
			if r.Instance == "pgdog-3" {
				err = errors.New("connection refused")
			}
			base, _, _ := strings.Cut(r.Step, "#")
			answers[base] = check.Answered{Instance: r.Instance, Kind: check.KindReload, OK: answers[base].OK || err == nil}
			return cutover.Reply{Step: r.Step, Err: err}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, []string{"pgdog-3"}, done.Lagging)
	require.Len(t, kept, 1)
	require.Contains(t, kept[0], "(pgdog-3)")
	require.Nil(t, check.FenceKeptAlert(0, kept[0], answers))
	for step, a := range answers {
		if a.Instance == "pgdog-3" {
			answers[step] = check.Answered{Instance: a.Instance, Kind: a.Kind, OK: true}
		}
	}
	v := check.FenceKeptAlert(0, kept[0], answers)
	require.NotNil(t, v, "the alert's wording is the one the checker reads")
	require.Equal(t, check.InvClaims, v.Invariant)
}
