package scenario

import (
	"cmp"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/cutover"
)

// Cutover is the N-instance cutover with the backend fence (§6.4) under live list-append
// traffic through every instance: the cutover machine and ConfigPush run on the daemon;
// instances crash (losing holds, swaps and streams; the designated one too, between its
// swap and the end), CUTOVER crashes before or after its swap or fails after it (PgDog
// keeps the swap when saving the config fails), reloads fail, backends restart, the store
// answers conflicts, the files target refuses writes, the daemon restarts and its clock
// jumps, links partition; and, as fault points the swarm turns on (cutoverWindowPoints,
// cutover_points.go), windows those faults make rare: one shard's fence failing for good
// beside a slow one, heavy writes as the copy starts, an instance the pause missed with its
// statements held on their way to the source, failed answers fed again late. The operator
// finalizes, reverses, or lets the machine finalize on its own. Checked: no acknowledged
// write lost, snapshot isolation per shard without stale reads, no write accepted by one
// layout after the other began serving (unless the other was fenced in between),
// generations only increase and files only for published ones, released instances route
// to writable shards, routing moves only with the layout it leaves fenced and after its
// CUTOVER took effect, a RESUME lands only on an open, published layout, Done's Missed,
// Lagging and Unresumed name only instances that did not answer (those three shared with
// the machine's world test), and every instance converges once faults heal.
var Cutover = detsim.Scenario{
	Name:   "cutover",
	Points: append(slices.Clone(cutoverPoints), cutoverWindowPoints...),
	Probes: []string{"fault:pgdog.cutover.crash", "model.cutover.crash.before_swap", "model.cutover.crash.after_swap",
		"fault:pgdog.cutover.fail_after_swap", "model.cutover.fail.after_swap", "designated.crash.after_swap",
		"fault:net.drop", "fault:net.duplicate", "fault:net.partition", "fault:net.slow", "fault:net.reset",
		"fault:pgdog.crash", "fault:pgdog.reload.after_parse", "fault:backend.restart", "fault:store.cas.conflict",
		"fault:files.write.fail", "fault:ctl.restart", "fault:clock.jump", "model.copy.failed", "cutover.alert",
		"cutover.finalized", "cutover.rolled_back", "cutover.reversed", "Cutover.Rollback", "Cutover.Reverse",
		"Cutover.Restart", "Cutover.Resolve", "model.cutover.rollback", "rolled_back.after_swap", "cutover.check.restarted",
		"fault:backend.fence.fail_slow", "fence.fail_slow.rolled_back", "fault:writes.heavy", "cutover.lag.gated",
		"fault:pgdog.held", "held.missed", "fault:ctl.reply.late"},
	Mutants: []string{MutantSkipFence, MutantUnfencedDestination, MutantPublishBeforeCutover, MutantResumeBeforePublish,
		MutantFilesBeforePublish, MutantReverseReusesGeneration, MutantAckEarly, MutantLeakyFence,
		MutantRetryReusesStep, MutantSkipDesignatedReload, MutantOpenDestinationOnRollback, MutantSkipFinalReload,
		MutantSkipCheck, MutantNoGrace, MutantNoLagThreshold, MutantCatchUpWhileSyncing, MutantAnyNewerStreamTakes,
		MutantNoCatchUpDeadline, MutantUndoUnfenceGivesUp, MutantReverseWithoutStream, MutantGraceFromSnapshot,
		MutantResolveRenumbers, MutantStaleReverseTrusted, MutantSkipDrain, MutantAdoptAnyTask, MutantUnresumedOnRetry,
		MutantStopGivesUp},
	World:       cutoverWorld,
	Tiny:        cutoverTiny,
	TinyPoints:  []string{"pgdog.cutover.crash", "backend.restart", "store.cas.conflict"},
	TinyMutants: []string{MutantSkipFence, MutantResumeBeforePublish, MutantFilesBeforePublish},
}

var cutoverPoints = []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset",
	"pgdog.crash", "pgdog.reload.after_parse", "pgdog.cutover.crash", "pgdog.cutover.fail_after_swap",
	"backend.restart", "store.cas.conflict", "files.write.fail", "ctl.restart", "clock.jump"}

// cutoverWindowPoints are the points the cutover's executor evaluates to open, in a run of
// the cutover scenario, one of the windows its worlds open every run (issue 20): a fence
// failing for good beside a slow one, heavy writes as the copy starts, an instance the
// pause missed with its statements held on their way to the source, answers of earlier
// attempts fed again late. The window worlds (cutover-drain, cutover-windows) open their
// own and do not evaluate these (cutover-windows lists ctl.reply.late for its window late).
var cutoverWindowPoints = []string{"backend.fence.fail_slow", "writes.heavy", "pgdog.held", "ctl.reply.late"}

// CutoverCrash is the cutover's second tiny configuration for exhaustive mode, where the
// simulator once found acknowledged writes lost: one client writing through the designated
// instance, and the crash of an instance. The designated instance crashing between its
// CUTOVER's swap (which cleared its holds) and the machine learning the outcome lists no
// task once restarted, which reads as "did not take", and the machine rolls back; before the
// destination was fenced at step 3, what the instance wrote there in between was on no shard
// the rollback serves. Its World is Cutover's, so seeds and mutants run the same.
var CutoverCrash = detsim.Scenario{
	Name:        "cutover-crash",
	Points:      Cutover.Points,
	Mutants:     Cutover.Mutants,
	World:       cutoverWorld,
	Tiny:        cutoverTiny2,
	TinyPoints:  []string{"pgdog.crash"},
	TinyMutants: []string{MutantUnfencedDestination},
}

// The cutover machine's mutants (cutover.Mutants), by scenario name.
const (
	MutantSkipFence = "cutover-skip-fence"
	// MutantUnfencedDestination leaves the destination writable at step 3, as the protocol
	// once did (cutover.Mutants.UnfencedDestination): it trips "no-lost-ack".
	MutantUnfencedDestination = "cutover-unfenced-destination"

	MutantPublishBeforeCutover    = "cutover-publish-before-cutover"
	MutantResumeBeforePublish     = "cutover-resume-before-publish"
	MutantFilesBeforePublish      = "cutover-files-before-publish"
	MutantReverseReusesGeneration = "cutover-reverse-reuses-generation"
	// MutantLeakyFence is a backend whose fence checks after writing: a refused
	// transaction is applied all the same. It trips "no-phantom".
	MutantLeakyFence = "backend-leaky-fence"

	// The protections issue 20 asks a necessity world for (see TestMutants).
	MutantRetryReusesStep           = "cutover-retry-reuses-step"
	MutantSkipDesignatedReload      = "cutover-skip-designated-reload"
	MutantOpenDestinationOnRollback = "cutover-open-destination-on-rollback"
	MutantSkipFinalReload           = "cutover-skip-final-reload"
	MutantSkipCheck                 = "cutover-skip-check"
	// MutantNoGrace finalizes with no grace period (Options.Grace of 1 ms): the fence on
	// the retired shards clears as soon as the reverse stream stops.
	MutantNoGrace = "cutover-no-grace"
	// MutantNoLagThreshold pauses at any lag (Options.LagThreshold at its maximum): the
	// catch-up gate is gone.
	MutantNoLagThreshold = "cutover-no-lag-threshold"
	// MutantCatchUpWhileSyncing counts the copy as caught up on its slot's lag while it
	// still syncs (cutover.Mutants.CatchUpWhileSyncing).
	MutantCatchUpWhileSyncing = "cutover-catch-up-while-syncing"
	// MutantAnyNewerStreamTakes reads a CUTOVER as taken when any newer active task is
	// listed (cutover.Mutants.AnyNewerStreamTakes).
	MutantAnyNewerStreamTakes = "cutover-any-newer-stream-takes"
	// MutantUnresumedOnRetry names in Done.Unresumed every instance whose RESUME needed a
	// retry (cutover.Mutants.UnresumedOnRetry): it trips cutover-claims.
	MutantUnresumedOnRetry = "cutover-unresumed-on-retry"
	// MutantNoCatchUpDeadline sets no catch-up deadline (cutover.Mutants.NoCatchUpDeadline).
	MutantNoCatchUpDeadline = "cutover-no-catch-up-deadline"
	// MutantUndoUnfenceGivesUp gives the rollback's Unfence up after Attempts failures
	// (cutover.Mutants.UndoUnfenceGivesUp): it trips released-writable in cutover-undo.
	MutantUndoUnfenceGivesUp = "cutover-undo-unfence-gives-up"
	// MutantReverseWithoutStream reverses although no reverse stream is known
	// (cutover.Mutants.ReverseWithoutStream).
	MutantReverseWithoutStream = "cutover-reverse-without-stream"
	// MutantGraceFromSnapshot keeps the grace's deadline from the snapshot after a restart
	// in the grace (cutover.Mutants.GraceFromSnapshot).
	MutantGraceFromSnapshot = "cutover-grace-from-snapshot"
	// MutantResolveRenumbers numbers the listings resolving a CUTOVER from 1 for each try
	// (cutover.Mutants.ResolveRenumbers).
	MutantResolveRenumbers = "cutover-resolve-renumbers"
	// MutantStaleReverseTrusted trusts a reverse stream an earlier round's late CUTOVER may
	// have finished (cutover.Mutants.StaleReverseTrusted).
	MutantStaleReverseTrusted = "cutover-stale-reverse-trusted"
	// MutantSkipDrain sends CUTOVER without the drain (cutover.Mutants.SkipDrain): in the
	// cutover-drain world, whose PgDog swaps on a stale lag (model.Router.StaleLagSwap),
	// the writes the stream had not carried are left on the source.
	MutantSkipDrain = "cutover-skip-drain"
	// MutantAdoptAnyTask adopts, after a restart with COPY_DATA in flight, the newest active
	// task on d, whichever database's (cutover.Mutants.AdoptAnyTask).
	MutantAdoptAnyTask = "cutover-adopt-any-task"
	// MutantStopGivesUp gives up finalize's STOP_TASK of the reverse stream after Attempts
	// and opens the old shards all the same (cutover.Mutants.StopGivesUp).
	MutantStopGivesUp = "cutover-stop-gives-up"
)

func cutoverMutants(mutant string) cutover.Mutants {
	return cutover.Mutants{
		SkipFence:                 mutant == MutantSkipFence,
		PublishBeforeCutover:      mutant == MutantPublishBeforeCutover,
		ResumeBeforePublish:       mutant == MutantResumeBeforePublish,
		FilesBeforePublish:        mutant == MutantFilesBeforePublish,
		ReverseReusesGeneration:   mutant == MutantReverseReusesGeneration,
		UnfencedDestination:       mutant == MutantUnfencedDestination,
		RetryReusesStep:           mutant == MutantRetryReusesStep,
		SkipDesignatedReload:      mutant == MutantSkipDesignatedReload,
		OpenDestinationOnRollback: mutant == MutantOpenDestinationOnRollback,
		SkipFinalReload:           mutant == MutantSkipFinalReload,
		SkipCheck:                 mutant == MutantSkipCheck,
		CatchUpWhileSyncing:       mutant == MutantCatchUpWhileSyncing,
		AnyNewerStreamTakes:       mutant == MutantAnyNewerStreamTakes,
		NoCatchUpDeadline:         mutant == MutantNoCatchUpDeadline,
		UndoUnfenceGivesUp:        mutant == MutantUndoUnfenceGivesUp,
		ReverseWithoutStream:      mutant == MutantReverseWithoutStream,
		GraceFromSnapshot:         mutant == MutantGraceFromSnapshot,
		ResolveRenumbers:          mutant == MutantResolveRenumbers,
		StaleReverseTrusted:       mutant == MutantStaleReverseTrusted,
		SkipDrain:                 mutant == MutantSkipDrain,
		AdoptAnyTask:              mutant == MutantAdoptAnyTask,
		UnresumedOnRetry:          mutant == MutantUnresumedOnRetry,
		StopGivesUp:               mutant == MutantStopGivesUp,
	}
}

// reshardingRecord is a record at generation 2 resharding from src to dst (published as 3).
func reshardingRecord(src, dst []shardmap.Backend) *shardmap.Record {
	rec := pgHash(2, src)
	tgt := shardmap.Layout{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: uint32(len(dst))}}
	for i, b := range dst {
		tgt.Shards = append(tgt.Shards, shardmap.Shard{Name: "t" + strconv.Itoa(i), Backend: b, Fence: shardmap.FenceOpen})
	}
	rec.Target = &tgt
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	return rec
}

// cutoverRun is the cutover machine on the daemon and what it reported.
type cutoverRun struct {
	d    *daemon
	host *detsim.Host[cutover.Input, cutover.Command]
	done *cutover.Done
	// started is when Start was fed.
	started    int64
	designated string
	// decision is the operator's (see cutoverWorld); w, when set, is the window world the
	// run is (cutover_worlds.go).
	decision int
	w        *cutoverWindow
	// src and dst are the layouts' backends, retry the machine's RetryAfter.
	src, dst []shardmap.Backend
	retry    int64
	// The cutover scenario's window points (cutoverWindowPoints), each evaluated once, at
	// the first command it is about: the shards whose fence fails for good and is slow
	// (hosts), and the instance whose PAUSE is refused.
	fenceDrawn, heavyDrawn, held bool
	fenceBroken, fenceSlow       string
	stuck                        *model.Router
	// The step invariants (check.Publish, check.Resume) at each record write and RESUME
	// as it takes effect: the first violation, when each successful CUTOVER on the
	// designated instance took effect (the simulator's step count; onTime: its request
	// arrived before its call was answered, so the machine could learn of it) and how many
	// times that instance had crashed by then, and when routing last moved (0: not yet).
	stepViolation *detsim.Violation
	// answers is what the machine was answered for each PAUSE, RELOAD and RESUME step,
	// for check.Claims.
	answers           map[string]check.Answered
	failures          *check.Failures           // the failed answers the machine took, for check.Failures.Alert
	listed            map[string][]cutover.Task // what the world answered each SHOW TASKS attempt with, for check.StuckAlert
	cutAt, cutOnTime  int
	cutCrashes, moved int
	moves             int
}

func hostCutover(d *daemon) *cutoverRun {
	c := &cutoverRun{d: d, failures: check.NewFailures(), listed: map[string][]cutover.Task{}}
	c.host = detsim.NewHost[cutover.Input, cutover.Command](d.ctl, cutover.New(), detsim.HostConfig[cutover.Input, cutover.Command]{
		Name:       "cutover",
		Exec:       c.exec,
		TimerFired: func(id string) cutover.Input { return cutover.TimerFired{ID: id} },
		Restarted:  cutover.Restarted{},
		Save:       saveBy[cutover.Input, cutover.Command]("cutover", cutover.Restore),
		Feeding:    func(in cutover.Input) { c.failures.Answer(check.AnswerOf(in)) },
	})
	return c
}

// drain is the executor's wait before a CUTOVER (driver.CutoverExecutor with
// postgres.Backend.AwaitSlotDrain): on each shard of x.Drain at once, read the shard's WAL
// position, then poll every 5 ms until the stream of d's task through the slot has
// carried everything up to it, for at most the instance's cutover timeout (the budget
// the pause has, and AwaitSlotDrain's DrainTimeout). Each read is a call of its own, as
// each of AwaitSlotDrain's queries is: a drain longer than one call's timeout is not cut
// short by it (it once was, and a reverse whose stream needed longer than that to drain
// failed every round, for ever, while the operator kept asking for it), and one lost
// request costs one call's timeout, not the drain's. Then cut; any failure is the
// Cutover's answer instead, and CUTOVER is not sent.
func (c *cutoverRun) drain(x cutover.Cutover, r *model.Router, fail func(any, error), cut func()) {
	s, f := c.d.f.s, c.d.f
	if len(x.Drain) == 0 {
		cut()
		return
	}
	ctl := c.d.ctl.Node
	inc := s.Net.Incarnation(ctl)
	left, errs := len(x.Drain), []error(nil)
	wait := cmp.Or(r.CutoverTimeout, 30_000)
	deadline := s.Now() + wait
	for _, d := range x.Drain {
		b := f.dir[d.Backend.Host]
		done := func(err error) {
			if err != nil {
				errs = append(errs, fmt.Errorf("draining slot %q on shard %s before CUTOVER: %w: %w", d.Slot, d.Shard, cutover.ErrNotSent, err))
			}
			if left--; left > 0 {
				return
			}
			if len(errs) > 0 {
				fail(nil, errors.Join(errs...))
				return
			}
			cut()
		}
		var at uint64
		type polled struct{ drained, found bool }
		var poll func()
		poll = func() {
			if s.Net.Incarnation(ctl) != inc || !s.Net.Up(ctl) {
				return // the controller restarted: this executor is gone
			}
			s.Net.Call(ctl, b.Node, "drain "+d.Shard, detsim.Idempotent,
				func(rep detsim.Reply) {
					drained, found := r.SlotDrained(d.Slot, b, at)
					rep(polled{drained, found}, nil)
				},
				func(v any, err error) {
					switch p, _ := v.(polled); {
					case err != nil:
						done(err)
					case !p.found:
						done(fmt.Errorf("no logical replication slot of %q on shard %s", d.Slot, d.Shard))
					case p.drained:
						done(nil)
					case s.Now() >= deadline:
						done(fmt.Errorf("slot %q on shard %s not drained after %d ms", d.Slot, d.Shard, wait))
					default:
						s.After(5, detsim.Label{Kind: "slot-drain", To: b.Name, What: d.Shard}, poll)
					}
				})
		}
		s.Net.Call(ctl, b.Node, "drain target "+d.Shard, detsim.Idempotent,
			func(rep detsim.Reply) { rep(b.LSN(), nil) },
			func(v any, err error) {
				if err != nil {
					done(err)
					return
				}
				at = v.(uint64)
				poll()
			})
	}
}

func taskOf(t *model.Task) cutover.Task {
	return cutover.Task{ID: t.ID, State: cutover.ClassifyTask(t.Status, t.Inner), Detail: t.Status + "/" + t.Inner, Kind: t.Type()}
}

// exec executes one cutover command over the network against the models.
func (c *cutoverRun) exec(cmd cutover.Command) {
	d := c.d
	s, f := d.f.s, d.f
	ctl := d.ctl.Node
	back := c.host.Caller()
	if c.w != nil {
		if back = c.w.feedback(c, back); c.w.intercept != nil && c.w.intercept(cmd, back) {
			return
		}
	} else {
		back = lateReplies(s, c.retry, back)
	}
	reply := func(step string) func(any, error) {
		return func(_ any, err error) { back(cutover.Reply{Step: step, Err: err}) }
	}
	inc := s.Net.Incarnation(ctl)
	answered := func(kind, inst, step string) func(any, error) {
		return func(v any, err error) { c.answer(inc, kind, inst, step, err); reply(step)(v, err) }
	}
	switch x := cmd.(type) {
	case cutover.WriteRecord:
		st := f.store
		s.Net.Call(ctl, f.storeNode, "cas v"+strconv.FormatUint(x.Expect, 10), 0,
			func(rep detsim.Reply) {
				cur := st.Current(dbRef)
				v, err := st.CAS(dbRef, x.Expect, x.Record)
				if err == nil {
					c.published(cur, x.Record)
				}
				rep(v, err)
			},
			func(v any, err error) {
				in := cutover.RecordWritten{Step: x.Step, Err: err}
				in.Version, in.Conflict = written(v, err)
				back(in)
			})
	case cutover.CopyData:
		c.heavyWrites()
		r := f.router(x.Instance)
		s.Net.Call(ctl, r.Node, "copy_data", 0,
			func(rep detsim.Reply) { id, err := r.CopyData(x.Source, x.Destination, x.Slot); rep(id, err) },
			func(v any, err error) {
				in := cutover.CopyStarted{Step: x.Step, Err: err}
				if err == nil {
					in.Task = v.(int64)
				}
				back(in)
			})
	case cutover.PollCopy:
		r := f.router(x.Instance)
		type polled struct {
			t   cutover.Task
			lag int64
		}
		s.Net.Call(ctl, r.Node, "poll", detsim.Idempotent,
			func(rep detsim.Reply) {
				p := polled{t: cutover.Task{ID: x.Task, State: cutover.TaskNotListed}, lag: r.SlotLag(x.Slot, x.Shards)}
				for _, t := range r.Tasks() {
					if t.ID == x.Task {
						p.t = taskOf(t)
					}
				}
				rep(p, nil)
			},
			func(v any, err error) {
				in := cutover.CopyPolled{Step: x.Step, Err: err}
				if err == nil {
					p := v.(polled)
					in.Task, in.LagBytes = p.t, p.lag
				}
				back(in)
			})
	case cutover.ListTasks:
		r := f.router(x.Instance)
		s.Net.Call(ctl, r.Node, "show tasks", detsim.Idempotent,
			func(rep detsim.Reply) {
				var ts []cutover.Task
				for _, t := range r.Tasks() {
					ts = append(ts, taskOf(t))
				}
				rep(ts, nil)
			},
			func(v any, err error) {
				in := cutover.TasksListed{Step: x.Step, Err: err}
				if err == nil {
					in.Tasks = v.([]cutover.Task)
					c.listed[x.Step] = in.Tasks
				}
				back(in)
			})
	case cutover.Pause:
		if c.holdStatements(); c.stuck != nil && x.Instance == c.stuck.ID {
			s.Probe("held.missed")
			refuseAdmin(s, x.Instance, "Pause", func(err error) {
				c.answer(inc, check.KindPause, x.Instance, x.Step, err)
				back(cutover.Reply{Step: x.Step, Err: err})
			})
			return
		}
		r := f.router(x.Instance)
		// Holds are not duplicated (one admin command on one connection), but one that
		// timed out can still land late: a late RESUME after the reverse PAUSE is the
		// machine's to report (Done.Unresumed), and the fence keeps writes safe meanwhile.
		s.Net.Call(ctl, r.Node, "pause", 0,
			func(rep detsim.Reply) { rep(nil, r.Pause(x.Database)) }, answered(check.KindPause, x.Instance, x.Step))
	case cutover.Resume:
		r := f.router(x.Instance)
		settled := false
		s.Net.Call(ctl, r.Node, "resume", 0,
			func(rep detsim.Reply) {
				if r.Paused(x.Database) && !settled {
					c.resumed(r) // one landing after its call failed is not the machine's decision now
				}
				rep(nil, r.Resume(x.Database))
			}, func(v any, err error) { settled = true; answered(check.KindResume, x.Instance, x.Step)(v, err) })
	case cutover.Fence:
		b := f.dir[x.Backend.Host]
		switch c.fenceFault(); x.Backend.Host {
		case c.fenceBroken:
			s.Net.Call(ctl, b.Node, "fence", detsim.Settled,
				func(rep detsim.Reply) {
					rep(nil, &adapters.BackendError{Backend: b.Name, Op: "FenceWrites", Code: "42501",
						Err: fmt.Errorf("permission denied to alter role %q", x.Role)})
				}, reply(x.Step))
		case c.fenceSlow:
			// Applied late, but never after the call failed (Settled): a timeout or a
			// reset first, or the controller or the server restarting, and it is dropped.
			settled, ctlInc, bInc := false, s.Net.Incarnation(ctl), s.Net.Incarnation(b.Node)
			wait := s.Between(3*c.retry/2+1, max(3*c.retry/2+1, 3*s.Options().Net.CallTimeout/2))
			s.Net.Call(ctl, b.Node, "fence", detsim.Settled,
				func(rep detsim.Reply) {
					s.After(wait, detsim.Label{Kind: "fence-slow", To: b.Name, What: x.Shard}, func() {
						if settled || s.Net.Incarnation(ctl) != ctlInc || s.Net.Incarnation(b.Node) != bInc {
							return
						}
						rep(nil, b.FenceWrites(x.Role))
					})
				}, func(v any, err error) { settled = true; reply(x.Step)(v, err) })
		default:
			s.Net.Call(ctl, b.Node, "fence", detsim.Settled,
				func(rep detsim.Reply) { rep(nil, b.FenceWrites(x.Role)) }, reply(x.Step))
		}
	case cutover.Unfence:
		b := f.dir[x.Backend.Host]
		s.Net.Call(ctl, b.Node, "unfence", detsim.Settled,
			func(rep detsim.Reply) { rep(nil, b.UnfenceWrites(x.Role)) }, reply(x.Step))
	case cutover.Cutover:
		r := f.router(x.Instance)
		c.drain(x, r, reply(x.Step), func() {
			answered := false
			s.Net.Call(ctl, r.Node, "cutover "+strconv.FormatInt(x.Task, 10), 0,
				func(rep detsim.Reply) {
					r.Cutover(x.Task, func(v any, err error) {
						if err == nil && r.ID == c.designated {
							c.cutAt, c.cutCrashes = s.Steps(), len(r.Crashes)
							if !answered {
								c.cutOnTime = c.cutAt
							}
						}
						rep(v, err)
					})
				}, func(v any, err error) { answered = true; reply(x.Step)(v, err) })
		})
	case cutover.WriteFiles:
		s.Net.Call(ctl, f.files.Node, "write g"+strconv.FormatUint(x.Generation, 10), detsim.Idempotent,
			func(rep detsim.Reply) { rep(nil, f.files.Write(x.Generation, model.Render(x.Record, false))) }, reply(x.Step))
	case cutover.Reload:
		r := f.router(x.Instance)
		s.Net.Call(ctl, r.Node, "reload g"+strconv.FormatUint(x.Generation, 10), detsim.Idempotent,
			func(rep detsim.Reply) { _, err := r.Reload(); rep(nil, err) }, answered(check.KindReload, x.Instance, x.Step))
	case cutover.StopTask:
		r := f.router(x.Instance)
		s.Net.Call(ctl, r.Node, "stop_task", detsim.Idempotent,
			func(rep detsim.Reply) {
				err := r.StopTask(x.Task)
				if errors.Is(err, model.ErrTask) {
					err = nil // "task not found": gone either way
				}
				rep(nil, err)
			}, reply(x.Step))
	case cutover.Alert:
		s.Probe("cutover.alert")
		if c.stepViolation == nil {
			c.stepViolation = c.failures.Alert(c.d.ctl.Now(), x.Step, x.Reason)
		}
		if c.stepViolation == nil {
			c.stepViolation = check.StuckAlert(c.d.ctl.Now(), x.Step, x.Reason, c.listed)
		}
		if c.stepViolation == nil {
			c.stepViolation = check.FenceKeptAlert(c.d.ctl.Now(), x.Reason, c.answers)
		}
		if strings.HasPrefix(x.Reason, "CUTOVER ") && strings.Contains(x.Reason, " listings: ") {
			s.Probe("cutover.alert.stuck") // judged by check.StuckAlert above
		}
	case cutover.Done:
		if c.done == nil {
			dd := x
			c.done = &dd
			s.Probe("cutover." + x.Outcome.String())
			if x.Outcome == cutover.RolledBack && swapped(f.router(c.designated)) {
				s.Probe("rolled_back.after_swap") // the path that once lost writes
			}
			if x.Outcome == cutover.RolledBack && c.fenceBroken != "" && strings.HasPrefix(x.Reason, "fence failed on shard") {
				s.Probe("fence.fail_slow.rolled_back")
			}
			if d.latest != nil {
				d.pushRecord(f.store.Current(dbRef).Clone()) // the daemon takes over again
			}
		}
	default:
		panic(fmt.Sprintf("scenario: cutover command %T has no executor", cmd))
	}
}

// swapped reports whether a CUTOVER swapped the instance's routing since it last started.
func swapped(r *model.Router) bool {
	for i := len(r.Loads) - 1; i >= 0; i-- {
		switch r.Loads[i].Why {
		case "cutover":
			return true
		case "start":
			return false
		}
	}
	return false
}

func cutoverWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	return cutoverWorldWith(s, mutant, nil)
}

// cutoverWorldWith is the cutover scenario's world, opened by w (nil: none) onto a window
// the swarm's faults make rare.
func cutoverWorldWith(s *detsim.Sim, mutant string, w *cutoverWindow) *detsim.Violation {
	f := newFleet(s)
	k := s.Param("source_shards", 1+s.Intn(2))
	src := f.backends(0, k, mutant == MutantAckEarly)
	dst := f.backends(k, 2*k, mutant == MutantAckEarly)
	for _, b := range f.order {
		b.LeakyFence = mutant == MutantLeakyFence
	}
	rec := reshardingRecord(src, dst)
	f.start(rec, false, s.Param("instances", 2+s.Intn(3)), s.Param("clients", 2+s.Intn(3)))
	f.crashes()
	d := newDaemon(f, configpush.Options{}, false)
	c := hostCutover(d)
	c.src, c.dst = src, dst
	d.busy = func() bool { return c.started != 0 && c.done == nil }
	d.start()

	opts := cutover.Options{
		LagThreshold:    int64(s.Param("lag_threshold", []int{0, 1000}[s.Intn(2)])),
		PollEvery:       int64(s.Param("poll_every_ms", []int{100, 500, 1000}[s.Intn(3)])),
		CatchUpDeadline: 60_000,
		RetryAfter:      int64(s.Param("retry_after_ms", []int{100, 500}[s.Intn(2)])),
		Attempts:        s.Param("attempts", 2+s.Intn(3)),
		// The grace must outlast a statement still travelling to a retired shard (see
		// cutover.Options.Grace): here the call timeout, past which the network drops a
		// request a router sent. Shorter is a misconfiguration the held window shows losing
		// a write (MutantNoGrace), not a run of the machine as configured.
		Grace:   int64(s.Param("grace_ms", []int{int(s.Options().Net.CallTimeout) + 500, 5000}[s.Intn(2)])),
		Mutants: cutoverMutants(mutant),
	}
	mutantOptions := func() {
		switch mutant {
		case MutantNoGrace:
			opts.Grace = 1
		case MutantNoLagThreshold:
			opts.LagThreshold = math.MaxInt64
		}
	}
	mutantOptions()
	decision := s.Param("decision", s.Intn(3)) // 0: the machine finalizes on its own; 1: the operator finalizes; 2: the operator reverses
	if w != nil && w.reverseThenFinalize {
		decision = 2
	}
	// Fault pgdog.held (see holdStatements): the machine finalizing on its own does so as
	// soon as every instance has resumed, as in cutover-windows' window held, so the source
	// may open while a statement the missed instance sent before its RELOAD travels.
	held := w == nil && s.Fault("pgdog.held")
	if decision == 0 {
		after := int(s.Between(1000, 10_000))
		if held {
			after = 1
		}
		opts.FinalizeAfter = int64(s.Param("finalize_after_ms", after))
	}
	if w != nil && w.options != nil {
		w.options(&opts, decision)
		mutantOptions()
	}
	designated := f.routers[s.Param("designated", s.Intn(len(f.routers)))].ID
	c.designated, c.decision, c.w, c.retry, c.held = designated, decision, w, opts.RetryAfter, held
	if w != nil && w.setup != nil {
		w.setup(f, c)
	}
	f.onCrash = func(r *model.Router) {
		if r.ID == designated && c.started != 0 && c.done == nil && swapped(r) {
			s.Probe("designated.crash.after_swap")
		}
	}
	gate := opts.LagThreshold
	if gate <= 0 {
		gate = 1_000_000 // cutover.Options' default
	}
	s.OnSpec(func(e machine.SpecEvent) {
		if v, ok := e.Get("restarted"); ok && e.Spec == cutover.Spec && e.Action == "Check" && v.Bool() {
			s.Probe("cutover.check.restarted") // d lost its reverse stream: reloaded after the resume
		}
		if e.Spec == cutover.Spec && e.Action == "Poll" {
			st, _ := e.Get("task")
			if lag, _ := e.Get("lag"); st.Str() == cutover.TaskReplicating.String() && lag.Int() > gate {
				s.Probe("cutover.lag.gated") // the catch-up gate holds the machine: the stream lags
			}
		}
	})
	plan := cutover.Plan{Designated: designated, Instances: f.routerIDs(), Role: appRole, Publication: "pub_app", Options: opts}
	startAt := int64(s.Param("start_at_ms", int(s.Between(0, 3000))))
	var start func()
	start = func() {
		// The operator's request. The daemon takes it once the push of the record's
		// generation has ended: a push still retrying would RELOAD the designated instance
		// after its CUTOVER and undo the swap, which lives in memory only (the simulator
		// found that: with the cutover starting at once, the designated instance went back
		// to the old shards and wrote there after finalize unfenced them). It is sent
		// again until the daemon is up to take it.
		cur := f.store.Current(dbRef)
		if !d.pushed[cur.Generation] {
			s.After(500, detsim.Label{Kind: "op", What: "cutover start"}, start)
			return
		}
		c.started = s.Now()
		if !c.host.Feed(cutover.Start{Record: cur.Clone(), Plan: plan}) {
			s.After(1000, detsim.Label{Kind: "op", What: "cutover start"}, start)
		}
	}
	s.At(startAt, detsim.Label{Kind: "op", What: "cutover start"}, start)
	if decision > 0 {
		// The operator's decision, sent again every 5 s until the cutover is done (the
		// daemon may be down when it is sent); a refused Reverse turns into Finalize.
		var in cutover.Input = cutover.Finalize{}
		if decision == 2 {
			in = cutover.Reverse{}
		}
		var decide func()
		decide = func() {
			if c.done == nil {
				// No reverse stream any more: keep the new layout. A window that reverses
				// then finalizes does so once its reverse was rolled back.
				if s.Probes()["Cutover.ReverseRefused"] > 0 || w != nil && w.reverseThenFinalize && s.Probes()["Cutover.ReverseAborted"] > 0 {
					in = cutover.Finalize{}
				}
				c.host.Feed(in)
				s.After(5000, detsim.Label{Kind: "op", What: "decide"}, decide)
			}
		}
		s.At(startAt+int64(s.Param("decide_after_ms", int(s.Between(500, 20_000)))), detsim.Label{Kind: "op", What: "decide"}, decide)
	}
	n := s.Param("ops", 20+s.Intn(41))
	s.SetWorkload(n, listAppendOps(s, f, n, 0))
	quiet := int64(90_000)
	if w != nil {
		quiet = max(quiet, w.quiet)
	}
	if v := f.runToEnd(quiet, 400_000); v != nil {
		return v
	}
	if v := c.check(rec, src, dst); v != nil || w == nil || w.check == nil {
		return v
	}
	return w.check(c)
}

// excluded is who ReleasedWritable leaves out: the designated instance, and the instances
// the machine reported missed (by a pause, in either direction), lagging or unresumed.
func (c *cutoverRun) excluded() map[string]bool {
	ex := map[string]bool{c.designated: true}
	if c.done != nil {
		for _, l := range [][]string{c.done.Missed, c.done.Lagging, c.done.Unresumed} {
			for _, id := range l {
				ex[id] = true
			}
		}
	}
	return ex
}

// check runs every checker of the cutover scenario.
func (c *cutoverRun) check(start *shardmap.Record, src, dst []shardmap.Backend) *detsim.Violation {
	f := c.d.f
	s := f.s
	final := f.store.Current(dbRef)
	if v := check.ListAppend(f.hist, f.finalRow(hostsOf(final.Layout))); v != nil {
		return v
	}
	side := map[string]int{}
	for _, b := range dst {
		side[b.Host] = 1
	}
	if v := check.OneSideServes(f.order, side, appRole); v != nil {
		return v
	}
	if v := check.Generations(f.store, f.files, f.routers); v != nil {
		return v
	}
	if v := c.d.checkSteps(); v != nil {
		return v
	}
	// The designated instance is excluded too: its CUTOVER clears its holds (PgDog), and it
	// then routes to the layout traffic moves to, fenced until the generation routing there
	// is published (both directions), so what it held is refused until the machine pauses
	// it again or opens that layout right after the publish. That is the price of never
	// letting a write land where a rollback would strand it; the fence refuses, nothing is
	// lost.
	excluded := c.excluded()
	for _, r := range f.routers {
		if len(r.Crashes) > 0 || c.done == nil {
			excluded[r.ID] = true // a restart loses the hold; an unfinished cutover releases nothing
		}
	}
	if v := check.ReleasedWritable(f.hist, f.routers, f.order, appRole, excluded); v != nil {
		return v
	}
	if c.stepViolation != nil {
		return c.stepViolation
	}
	if c.done != nil {
		if v := check.Claims(s.Now(), *c.done, c.answers); v != nil {
			return v
		}
		if v := check.FencesAtDone(s.Now(), *c.done, fences(f, src), fences(f, dst)); v != nil {
			return v
		}
	}
	if c.done == nil {
		return &detsim.Violation{Invariant: "converges", T: s.Now(),
			Detail: fmt.Sprintf("the cutover started at t=%d is not done after the faults healed and a quiet period", c.started)}
	}
	if c.done.Outcome == cutover.Halted || final.State.Phase != shardmap.Serving {
		s.Probe("cutover.halted")
		return nil // an operator must decide: nothing converges on its own
	}
	return check.Converged(f.routers, db, final.Generation, hostsOf(final.Layout), s.Now())
}

// fences is the backends' fences of the application role now, for check.FencesAtDone
// (nothing fences or unfences after Done: the cutover is the only machine that does).
func fences(f *fleet, bs []shardmap.Backend) []check.FenceState {
	out := make([]check.FenceState, len(bs))
	for i, b := range bs {
		be := f.dir[b.Host]
		out[i] = check.FenceState{Shard: be.Name, Fenced: be.Fenced(appRole),
			Ever: slices.ContainsFunc(be.Fences, func(x model.Fence) bool { return x.Role == appRole && x.On })}
	}
	return out
}

// cut reports whether a CUTOVER on the designated instance took effect since routing last
// moved. onTime counts only one whose request arrived before its call was answered, and
// only while the instance keeps it: restarted, it routes by the files again and lists no
// task, so the machine reads the CUTOVER as not taken and rolls back, rightly.
func (c *cutoverRun) cut(onTime bool) bool {
	if !onTime {
		return c.cutAt > c.moved
	}
	return c.cutOnTime > c.moved && len(c.d.f.router(c.designated).Crashes) == c.cutCrashes
}

// answer records, for check.Claims, the answer to an attempt of a PAUSE, RELOAD or
// RESUME step as the machine is fed it: only while the controller process that sent it
// runs (the host drops it otherwise), and as the world gave it, before lateReplies feeds
// a failure again.
func (c *cutoverRun) answer(inc uint64, kind, inst, step string, err error) {
	if n := c.d.ctl.Node; !c.d.f.s.Net.Up(n) || c.d.f.s.Net.Incarnation(n) != inc {
		return
	}
	if c.answers == nil {
		c.answers = map[string]check.Answered{}
	}
	base, _, _ := strings.Cut(step, "#")
	c.answers[base] = check.Answered{Instance: inst, Kind: kind, OK: c.answers[base].OK || err == nil}
}

// fencedIn returns whether the application role is fenced on a backend host.
func (c *cutoverRun) fencedIn(host string) bool { return c.d.f.dir[host].Fenced(appRole) }

// published checks a record write that committed, from cur to next: one that moves routing
// to the other layout (check.Publish).
func (c *cutoverRun) published(cur, next *shardmap.Record) {
	from, to := hostsOf(cur.Layout), hostsOf(next.Layout)
	if slices.Equal(from, to) {
		return
	}
	if c.stepViolation == nil {
		c.stepViolation = check.Publish(check.Move{T: c.d.f.s.Now(), Generation: next.Generation,
			Reverse: c.moves%2 == 1, Leaves: from,
			Fenced: c.fencedIn, Cut: c.cut(false), Designated: c.designated})
	}
	c.moved, c.moves = c.d.f.s.Steps(), c.moves+1
}

// resumed checks a RESUME taking effect on r (check.Resume): onto the stored layout, open,
// and not between a forward CUTOVER that took effect and its publish.
func (c *cutoverRun) resumed(r *model.Router) {
	if c.stepViolation != nil {
		return
	}
	cur := c.d.f.store.Current(dbRef)
	rs := check.Resumed{T: c.d.f.s.Now(), Instance: r.ID, Stored: cur.Generation, Serves: hostsOf(cur.Layout), Fenced: c.fencedIn}
	if c.moves == 0 && c.cut(true) {
		rs.Unpublished = cur.Generation + 1
	}
	c.stepViolation = check.Resume(rs)
}

// cutoverTiny is the exhaustive configuration: one source shard resharded to two, two
// instances, one client writing in a closed loop through the instances in turn, the
// machine finalizing on its own, and the scenario's tiny faults.
func cutoverTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	return cutoverTinyWith(s, mutant, 1)
}

// cutoverTiny2 is cutoverTiny with two clients, one per instance, so both instances have a
// query arriving as the cutover pauses them (ten times the states).
func cutoverTiny2(s *detsim.Sim, mutant string) *detsim.Violation {
	return cutoverTinyWith(s, mutant, 2)
}

func cutoverTinyWith(s *detsim.Sim, mutant string, clients int) *detsim.Violation {
	f := newFleet(s)
	src := f.backends(0, 1, mutant == MutantAckEarly)
	dst := f.backends(1, 2, mutant == MutantAckEarly)
	rec := reshardingRecord(src, dst)
	f.start(rec, false, 2, clients)
	f.crashes()
	d := newController(f)
	c := hostCutover(d)
	f.hashState()
	outer := s.StateHasher()
	s.SetStateHasher(func(h hash.Hash) {
		outer(h)
		detsim.RelativeJSON(h, c.host.Machine().(*cutover.Machine).Snapshot(), d.ctl.Now())
		cur := f.store.Current(dbRef)
		g, _ := f.files.Read()
		fmt.Fprintf(h, "rec=%d/%d/%d files=%d done=%v", cur.Version, cur.Generation, cur.State.Phase, g, c.done != nil)
	})
	opts := cutover.Options{PollEvery: 100, RetryAfter: 100, Attempts: 2, Grace: 100, FinalizeAfter: 100,
		CatchUpDeadline: 10_000, Mutants: cutoverMutants(mutant)}
	c.designated = f.routers[0].ID
	plan := cutover.Plan{Designated: c.designated, Instances: f.routerIDs(), Role: appRole, Publication: "pub_app", Options: opts}
	s.At(0, detsim.Label{Kind: "op", What: "cutover start"}, func() {
		c.started = s.Now()
		c.host.Feed(cutover.Start{Record: f.store.Current(dbRef).Clone(), Plan: plan})
	})
	if clients == 1 {
		// Six appends, each sent 50 ms after the previous one answered, through the
		// instances in turn (the non-designated one first, so one of its queries meets
		// the pause).
		var next func(i int)
		next = func(i int) {
			if i == 6 {
				return
			}
			txn := model.Txn{ID: int64(i + 1), Ops: []model.Op{{Kind: model.OpAppend, Key: "k" + strconv.Itoa(i%2), Value: int64(i + 1)}}}
			f.queryThen(0, (i+1)%2, txn, func() {
				s.After(50, detsim.Label{Kind: "op", What: "think"}, func() { next(i + 1) })
			})
		}
		s.At(0, detsim.Label{Kind: "op", What: "client"}, func() { next(0) })
	}
	if clients == 2 {
		// Two appends from one client through the designated instance, the first at
		// 150 ms and the next 50 ms after it answered (a second client through the other
		// instance adds nothing to the path this configuration is for, and the tree grows
		// past 400,000 runs).
		for cl := range 1 {
			var next func(i int)
			next = func(i int) {
				if i == 2 {
					return
				}
				id := int64(cl*10 + i + 1)
				txn := model.Txn{ID: id, Ops: []model.Op{{Kind: model.OpAppend, Key: "k" + strconv.Itoa(cl), Value: id}}}
				f.queryThen(cl, cl, txn, func() {
					s.After(50, detsim.Label{Kind: "op", What: "think"}, func() { next(i + 1) })
				})
			}
			s.At(150, detsim.Label{Kind: "op", What: "client"}, func() { next(0) })
		}
	}
	s.StartNemesis()
	s.Run(3000, 200_000)
	// What looks only at the past holds at any state, so it is checked on runs the explorer
	// cut too; the rows can be compared with what was acknowledged only once the cutover is
	// done (mid-cutover, acknowledged writes are still on their way between the layouts),
	// and a cut run's future was explored from the same state, history included.
	side := map[string]int{}
	for _, b := range dst {
		side[b.Host] = 1
	}
	if v := check.OneSideServes(f.order, side, appRole); v != nil {
		return v
	}
	if v := check.Generations(f.store, f.files, f.routers); v != nil {
		return v
	}
	if v := c.d.checkSteps(); v != nil {
		return v
	}
	excluded := c.excluded()
	for _, r := range f.routers {
		if len(r.Crashes) > 0 {
			excluded[r.ID] = true
		}
	}
	if v := check.ReleasedWritable(f.hist, f.routers, f.order, appRole, excluded); v != nil {
		return v
	}
	if c.stepViolation != nil {
		return c.stepViolation
	}
	if v := detsim.Pruned(s); v != nil || c.done == nil {
		return v
	}
	return check.ListAppend(f.hist, f.finalRow(hostsOf(f.store.Current(dbRef).Layout)))
}
