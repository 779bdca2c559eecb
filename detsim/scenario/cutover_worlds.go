package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// The cutover's worlds of issue 20: each opens, every run, a window the swarm's faults
// make rare, in which one of the machine's protections is what keeps an invariant (its
// mutant in TestMutants trips it there). They are the cutover scenario's world with a
// window on (cutoverWorldWith), so everything the cutover scenario checks is checked too.

// InvCutoverAsDecided: on a network without faults, a cutover ends as the operator
// decided — Finalized when asked to finalize (or left to finalize on its own), Reversed
// when asked to reverse, or RolledBack for that reason when the Reverse came before the
// point of no return. A cutover
// that pauses with a backlog its stream cannot drain within PgDog's cutover_timeout has
// its CUTOVER aborted, every instance held meanwhile, until it gives up and rolls back.
const InvCutoverAsDecided = "cutover-as-decided"

// CutoverDrain is the cutover on a network without faults, with a replication stream of
// finite throughput (20 changes/s), PgDog's cutover_timeout at 1.5 s and a burst of writes
// (300 to 600, one every 2 ms) from the moment the cutover starts, so the copy's slot holds
// a backlog when the stream starts and the first polls show a large lag: the catch-up lag
// threshold is what keeps the pause short enough for the drain. Its PgDog swaps on a stale
// lag (model.Router.StaleLagSwap), so the cutover's own drain before CUTOVER, bounded by
// the same cutover_timeout, is what keeps the stream's last writes (MutantSkipDrain).
// Checked: all of the cutover scenario's invariants, and InvCutoverAsDecided.
var CutoverDrain = detsim.Scenario{
	Name:    "cutover-drain",
	Probes:  []string{"drain.backlog", "cutover.finalized"},
	Mutants: Cutover.Mutants,
	World: func(s *detsim.Sim, mutant string) *detsim.Violation {
		return cutoverWorldWith(s, mutant, drainWindow(s))
	},
}

// CutoverWindows is the cutover scenario under its faults, with one window open per run
// (param window):
//
//   - 0 held: an instance other than the designated one refuses every PAUSE (PgDog's admin
//     connections exhausted), so the cutover goes on with it missed, writing to the fenced
//     source through links that hold each statement for up to the call timeout until its
//     RELOAD; the grace is longer than the call timeout. Without the grace, a statement it
//     sent just before its RELOAD lands once finalize opens the source, after the reverse
//     stream stopped: no-lost-ack. With grace_restart, the controller also restarts early
//     in the grace, its wall clock jumped past the grace's deadline while it was down:
//     without the grace waited out again from the restart (MutantGraceFromSnapshot), the
//     same statement lands: no-lost-ack.
//   - 1 swap-fails: the designated instance's first CUTOVER swaps and then fails (PgDog
//     when saving the config fails), and the machine rolls back: InvDesignatedWritable from
//     the rollback's resume of d.
//   - 2 restart: the designated instance crashes as soon as its CUTOVER has answered and
//     restarts at once, reading the files of the generation before (routing to the fenced
//     source); with check_blind its SHOW TASKS fails from then on, so the check after the
//     resume cannot tell, and finalize's reload is what moves it before the source opens.
//     InvDesignatedWritable when finalize begins, and the cutover's invariants.
//   - 3 late: answers of commands reach the machine a second time, later (fault
//     ctl.reply.late: a transport that delivers twice, a timed-out call's answer turning
//     up), while a retry of the same step is in flight.
//
// Beside any window, fault pgdog.cutover.stall keeps a CUTOVER draining for 12 s: its call
// times out, and the machine lists the task cutting over until its stuck alert, which
// check.StuckAlert holds against the listing it was raised on (cutover-stuck-alert).
//
// A client writes through the instance the window is about (the missed one, the designated
// one) in a closed loop until the cutover is done, so the window has traffic.
var CutoverWindows = detsim.Scenario{
	Name:   "cutover-windows",
	Points: append(slices.Clone(cutoverPoints), "ctl.reply.late", "pgdog.cutover.stall"),
	Probes: []string{"window.held.missed", "window.swapfail.rolled_back", "window.restart.check_blind",
		"window.restart.routes_source", "fault:ctl.reply.late", "cutover.finalized", "cutover.rolled_back",
		"fault:pgdog.cutover.stall", "cutover.alert.stuck"},
	Mutants: Cutover.Mutants,
	World: func(s *detsim.Sim, mutant string) *detsim.Violation {
		return cutoverWorldWith(s, mutant, windowOf(s))
	},
}

// CutoverUndo is the cutover scenario under its faults with, every run, a rollback whose
// release of a source shard that shard refuses for a while: one destination shard's fence
// fails for good (fault backend.fence.fail_slow's broken shard, without the slow one), so
// the fence stage fails and the cutover rolls back, and one source shard refuses the
// rollback's Unfence (its connections exhausted, 53300) one to three times more than
// Attempts, then takes it. A client writes through each instance but the designated one in
// a closed loop until 2 s after the cutover is done, so the resumed instances have traffic
// for that shard. The rollback's Unfence retried until it succeeds is what keeps
// released-writable: given up after Attempts (MutantUndoUnfenceGivesUp), the instances
// resume onto the shard still fenced and every write to it is refused.
var CutoverUndo = detsim.Scenario{
	Name:    "cutover-undo",
	Points:  slices.Clone(cutoverPoints),
	Probes:  []string{"window.undo.refused", "window.undo.retried", "window.undo.unfenced", "cutover.rolled_back"},
	Mutants: Cutover.Mutants,
	World: func(s *detsim.Sim, mutant string) *detsim.Violation {
		return cutoverWorldWith(s, mutant, undoWindow(s))
	},
}

// CutoverLateReverse is the cutover scenario under its faults with, every run, a reverse
// whose CUTOVER is still on its way when finalize opens the old shards, unless finalize's
// STOP_TASK of the reverse stream stopped it first. The operator reverses; the reverse's
// first CUTOVER request is held on its way (its call times out) and every retry is refused
// (PgDog's admin connections exhausted, 53300), so the reverse rolls back with that
// CUTOVER still travelling; the operator then finalizes, and d refuses finalize's
// STOP_TASK one to three times more than Attempts before it takes it. The held CUTOVER
// arrives at d either between two of those refusals (param land 0) or up to a second after
// the cutover is done (land 1), while a client writes through d. Finalize's STOP_TASK
// retried until it succeeds is what keeps converges: given up after Attempts
// (MutantStopGivesUp), the cutover ends with the stream running, and the CUTOVER landing
// then takes it. The model's PgDog swaps the database with the reshard one by name, which
// d's files no longer have once it reloaded the published generation, so d routes the
// application to no shard at all (the machine's world model, which swaps d to the other
// layout, shows the same landing as split brain: TestFinalizeStopsTheStreamBeforeTheOldShardsOpen).
var CutoverLateReverse = detsim.Scenario{
	Name:   "cutover-late-reverse",
	Points: slices.Clone(cutoverPoints),
	Probes: []string{"window.latereverse.held", "window.latereverse.aborted", "window.latereverse.stop_refused",
		"window.latereverse.landed", "window.latereverse.landed_after_done"},
	Mutants: Cutover.Mutants,
	World: func(s *detsim.Sim, mutant string) *detsim.Violation {
		return cutoverWorldWith(s, mutant, lateReverseWindow(s))
	},
}

// lateReverseWindow is CutoverLateReverse's world.
func lateReverseWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{reverseThenFinalize: true}
	afterDone := s.Param("land", s.Intn(2)) == 1
	var d *model.Router
	var held *cutover.Cutover
	attempts, refused, refusals, landAt := 0, 0, 0, 0
	land := func() {
		if held == nil || !s.Net.Up(d.Node) {
			return
		}
		task := held.Task
		held = nil
		s.Probe("window.latereverse.landed")
		d.Cutover(task, func(any, error) {}) // its answer goes nowhere: the call timed out long ago
	}
	w.options = func(o *cutover.Options, _ int) { attempts = o.Attempts }
	w.setup = func(f *fleet, c *cutoverRun) {
		i := routerIndex(f, c.designated)
		d = f.routers[i]
		refusals = attempts + int(s.Between(1, 3))
		landAt = 1 + s.Intn(refusals)
		closedLoop(f, c, i, "desg", 20_000, 3000)
		s.OnSpec(func(e machine.SpecEvent) {
			if e.Spec != cutover.Spec {
				return
			}
			switch e.Action {
			case "ReverseAborted":
				if held != nil {
					s.Probe("window.latereverse.aborted")
				}
			case "Done":
				if afterDone && held != nil {
					s.After(s.Between(1, 1000), detsim.Label{Kind: "op", To: d.ID, What: "late reverse CUTOVER"}, func() {
						if held != nil {
							s.Probe("window.latereverse.landed_after_done")
						}
						land()
					})
				}
			}
		})
	}
	w.intercept = func(cmd cutover.Command, back func(cutover.Input)) bool {
		switch x := cmd.(type) {
		case cutover.Cutover:
			if x.Instance != d.ID || !strings.Contains(x.Step, "/reverse1/cutover/") {
				return false
			}
			if held == nil && !strings.Contains(x.Step, "#") {
				held = &x // on its way: it arrives later (land)
				s.Probe("window.latereverse.held")
				s.After(s.Options().Net.CallTimeout, detsim.Label{Kind: "reply", From: d.ID, What: "Cutover timed out"},
					func() { back(cutover.Reply{Step: x.Step, Err: detsim.ErrIndeterminate}) })
				return true
			}
			refuseAdmin(s, d.ID, "Cutover", func(err error) { back(cutover.Reply{Step: x.Step, Err: err}) })
			return true
		case cutover.StopTask:
			if x.Instance != d.ID || !strings.Contains(x.Step, "/stop/") || strings.Contains(x.Step, "/undo/") ||
				strings.Contains(x.Step, "/reverse") || refused == refusals {
				return false
			}
			refused++
			s.Probe("window.latereverse.stop_refused")
			refuseAdmin(s, d.ID, "StopTask", func(err error) {
				if !afterDone && refused == landAt {
					land() // between two refusals: the stream still runs
				}
				back(cutover.Reply{Step: x.Step, Err: err})
			})
			return true
		}
		return false
	}
	return w
}

// undoWindow is CutoverUndo's world.
func undoWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{}
	var shard string
	attempts, refused, refusals := 0, 0, 0
	w.options = func(o *cutover.Options, _ int) { attempts = o.Attempts }
	w.setup = func(f *fleet, c *cutoverRun) {
		c.fenceBroken = c.dst[s.Intn(len(c.dst))].Host // the executor fails its Fence for good
		shard = c.src[s.Intn(len(c.src))].Host
		refusals = attempts + int(s.Between(1, 3))
		for i, r := range f.routers {
			if r.ID != c.designated {
				closedLoop(f, c, i, "undo"+strconv.Itoa(i), int64(20_000+10_000*i), 2000)
			}
		}
	}
	w.intercept = func(cmd cutover.Command, back func(cutover.Input)) bool {
		x, ok := cmd.(cutover.Unfence)
		if !ok || x.Backend.Host != shard || !strings.Contains(x.Step, "/undo/unfence/") || strings.Contains(x.Step, "/reverse") {
			return false
		}
		if refused == refusals {
			s.Probe("window.undo.unfenced") // the rollback's Unfence outlasted the refusals
			return false
		}
		if refused++; refused > attempts {
			s.Probe("window.undo.retried") // retried past Attempts
		}
		s.Probe("window.undo.refused")
		refuseLater(s, shard, "Unfence", &adapters.BackendError{Backend: shard, Op: "UnfenceWrites", Code: "53300",
			Err: fmt.Errorf("sorry, too many clients already")}, func(err error) { back(cutover.Reply{Step: x.Step, Err: err}) })
		return true
	}
	return w
}

// cutoverWindow is what a window changes in the cutover scenario's world: the options,
// the fleet once built, the commands and answers between the machine and the world, and
// what is checked at the end.
type cutoverWindow struct {
	// options sees the options once the operator's decision is drawn (the mutant's own
	// options are applied after it again).
	options func(o *cutover.Options, decision int)
	setup   func(f *fleet, c *cutoverRun)
	// intercept sees every command before it is executed; true means it executed it.
	intercept func(cmd cutover.Command, back func(cutover.Input)) bool
	// answers, when set, sees every answer before the machine does.
	answers func(back func(cutover.Input), in cutover.Input)
	check   func(c *cutoverRun) *detsim.Violation
	quiet   int64
	// reverseThenFinalize: the operator reverses, and finalizes once that reverse was
	// rolled back (a Reverse refused turns into Finalize in every world).
	reverseThenFinalize bool
	// violation is the first violation a window's hook saw during the run.
	violation *detsim.Violation
}

func (w *cutoverWindow) feedback(_ *cutoverRun, back func(cutover.Input)) func(cutover.Input) {
	if w.answers == nil {
		return back
	}
	return func(in cutover.Input) { w.answers(back, in) }
}

func (w *cutoverWindow) violate(v *detsim.Violation) {
	if w.violation == nil {
		w.violation = v
	}
}

// drainWindow is CutoverDrain's world.
func drainWindow(s *detsim.Sim) *cutoverWindow {
	const rate, timeout = 20, 1500
	bulk := s.Param("bulk_writes", 300+s.Intn(301))
	w := &cutoverWindow{quiet: 200_000}
	w.options = func(o *cutover.Options, _ int) {
		// Ten changes (100 bytes each in SHOW REPLICATION_SLOTS): what the stream drains in
		// half a second, well within cutover_timeout. (Zero would be the default, PgDog's
		// 1 MB, ten thousand of the model's changes.)
		o.LagThreshold = 1000
		o.Attempts = 2
		o.CatchUpDeadline = 300_000 // the backlog takes up to 30 s to drain at 20 changes/s
	}
	w.answers = func(back func(cutover.Input), in cutover.Input) {
		if p, ok := in.(cutover.CopyPolled); ok && p.LagBytes > 100*2*timeout*rate/1000 {
			s.Probe("drain.backlog") // more than two cutover_timeouts of changes behind
		}
		back(in)
	}
	w.setup = func(f *fleet, c *cutoverRun) {
		for _, r := range f.routers {
			r.StreamRate, r.CutoverTimeout = rate, timeout
			r.StaleLagSwap = true // PgDog's own wait may swap early: only the drain waits
		}
		f.clients = append(f.clients, s.Net.AddNode("bulk"))
		client := len(f.clients) - 1
		var burst func()
		burst = func() {
			if c.started == 0 {
				s.After(100, detsim.Label{Kind: "op", What: "bulk wait"}, burst)
				return
			}
			for i := range bulk {
				id := int64(10_000 + i)
				txn := model.Txn{ID: id, Ops: []model.Op{{Kind: model.OpAppend, Key: "bulk" + strconv.Itoa(i%4), Value: id}}}
				s.After(int64(2*i), detsim.Label{Kind: "op", What: "bulk", ID: id}, func() { f.query(client, i%len(f.routers), txn) })
			}
		}
		s.At(0, detsim.Label{Kind: "op", What: "bulk wait"}, burst)
	}
	w.check = func(c *cutoverRun) *detsim.Violation {
		o := c.done.Outcome
		early := o == cutover.RolledBack && strings.HasPrefix(c.done.Reason, "reverse requested")
		if c.decision == 2 && (o == cutover.Reversed || early) || c.decision != 2 && o == cutover.Finalized {
			return nil
		}
		return &detsim.Violation{Invariant: InvCutoverAsDecided, T: s.Now(),
			Detail: fmt.Sprintf("decision %d on a network without faults, but the cutover ended %v: %s", c.decision, o, c.done.Reason)}
	}
	return w
}

// windowOf draws the window of a CutoverWindows run.
func windowOf(s *detsim.Sim) *cutoverWindow {
	switch s.Param("window", s.Intn(4)) {
	case 0:
		return heldWindow(s)
	case 1:
		return swapFailsWindow(s)
	case 2:
		return restartWindow(s)
	}
	return lateWindow(s)
}

// closedLoop writes through instance via from a client of its own, one append after
// another, until linger ms after the cutover is done. Its transactions are numbered from
// base+1.
func closedLoop(f *fleet, c *cutoverRun, via int, name string, base, linger int64) {
	s := f.s
	f.clients = append(f.clients, s.Net.AddNode(name))
	client := len(f.clients) - 1
	n, until := int64(0), int64(-1)
	var next func()
	next = func() {
		if c.done != nil && until < 0 {
			until = s.Now() + linger
		}
		if until >= 0 && s.Now() >= until {
			return
		}
		n++
		id := base + n
		txn := model.Txn{ID: id, Ops: []model.Op{{Kind: model.OpAppend, Key: name + strconv.FormatInt(n%2, 10), Value: id}}}
		f.queryThen(client, via, txn, func() { s.After(s.Between(0, 20), detsim.Label{Kind: "op", What: name}, next) })
	}
	s.At(0, detsim.Label{Kind: "op", What: name}, next)
}

func routerIndex(f *fleet, id string) int {
	return slices.IndexFunc(f.routers, func(r *model.Router) bool { return r.ID == id })
}

// heldWindow: see CutoverWindows (window 0).
func heldWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{}
	var stuck *model.Router
	// grace_restart: the controller restarts early in the grace, its wall clock having
	// jumped past the grace's deadline while it was down; the restarted machine must wait
	// the grace out again from then (MutantGraceFromSnapshot keeps the old deadline).
	graceRestart, finalReload := s.Param("grace_restart", s.Intn(2)) == 1, false
	w.options = func(o *cutover.Options, decision int) {
		// Longer than any statement can travel: a request on a new session not delivered
		// by the call timeout is dropped (adapters' connect timeout), and the fence ends
		// every open session.
		o.Grace = s.Options().Net.CallTimeout + 500
		if decision == 0 {
			o.FinalizeAfter = 1 // finalize as soon as every instance has resumed
		}
	}
	w.setup = func(f *fleet, c *cutoverRun) {
		// As fault pgdog.held in the cutover scenario, from the start and every run.
		i := (routerIndex(f, c.designated) + 1 + s.Intn(len(f.routers)-1)) % len(f.routers)
		stuck = holdLinks(f, c, i)
		if !graceRestart {
			return
		}
		s.OnSpec(func(e machine.SpecEvent) {
			ok, _ := e.Get("ok")
			in, _ := e.Get("instance")
			if !finalReload || e.Spec != cutover.Spec || e.Action != "Reload" || !ok.Bool() || in.Str() != c.designated {
				return
			}
			finalReload = false // d is on the published files: the grace begins
			ctl := c.d.ctl
			s.After(s.Between(1, 50), detsim.Label{Kind: "crash", To: "ctl", What: "in the grace"}, func() {
				ctl.Crash()
				ctl.Offset += 2 * (s.Options().Net.CallTimeout + 500)
				s.After(50, detsim.Label{Kind: "boot", To: "ctl"}, ctl.Boot)
			})
		})
	}
	w.intercept = func(cmd cutover.Command, back func(cutover.Input)) bool {
		if r, ok := cmd.(cutover.Reload); ok && strings.Contains(r.Step, "/final/reload/") {
			finalReload = true
		}
		x, ok := cmd.(cutover.Pause)
		if !ok || x.Instance != stuck.ID {
			return false
		}
		s.Probe("window.held.missed")
		refuseAdmin(s, stuck.ID, "Pause", func(err error) { back(cutover.Reply{Step: x.Step, Err: err}) })
		return true
	}
	return w
}

// refuseAdmin answers an admin command to instance with PgDog's refusal when its admin
// connections are exhausted (53300), a round trip later; nothing is applied.
func refuseAdmin(s *detsim.Sim, instance, op string, answer func(error)) {
	refuseLater(s, instance, op, &adapters.RouterError{Instance: instance, Op: op, Code: "53300", Err: fmt.Errorf("too many admin connections")}, answer)
}

// refuseLater answers op, sent to from, with err a round trip later; nothing is applied.
func refuseLater(s *detsim.Sim, from, op string, err error, answer func(error)) {
	s.After(2*s.Options().Net.DelayMax, detsim.Label{Kind: "reply", From: from, What: op + " refused"}, func() { answer(err) })
}

// swapFailsWindow: see CutoverWindows (window 1).
func swapFailsWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{}
	var d *model.Router
	since, rolledBack := -1, int64(-1)
	w.setup = func(f *fleet, c *cutoverRun) {
		i := routerIndex(f, c.designated)
		d = f.routers[i]
		d.FailAfterSwap = 1
		s.OnSpec(func(e machine.SpecEvent) {
			if e.Spec == cutover.Spec && e.Action == "Rollback" && rolledBack < 0 {
				if _, rev := e.Get("reverse"); !rev {
					rolledBack = s.Now()
				}
			}
		})
		closedLoop(f, c, i, "desg", 20_000, 0)
	}
	w.intercept = func(cmd cutover.Command, _ func(cutover.Input)) bool {
		if x, ok := cmd.(cutover.Resume); ok && x.Instance == d.ID && since < 0 && rolledBack >= 0 && strings.Contains(x.Step, "/undo/") {
			since = s.Steps()
			s.Probe("window.swapfail.rolled_back")
		}
		return false
	}
	w.check = func(c *cutoverRun) *detsim.Violation {
		if since < 0 {
			return nil
		}
		for _, l := range d.Loads {
			if l.T >= rolledBack && l.Why == "cutover" {
				return nil // a CUTOVER that landed after the machine gave up on it
			}
		}
		if slices.ContainsFunc(d.Crashes, func(t int64) bool { return t >= rolledBack }) {
			return nil
		}
		return check.RefusedAfter(c.d.f.hist, d, c.d.f.order, appRole, since)
	}
	return w
}

// restartWindow: see CutoverWindows (window 2).
func restartWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{}
	blind := s.Param("check_blind", s.Intn(2)) == 1
	var f *fleet
	var d *model.Router
	crashed, alerted := false, false
	w.setup = func(fl *fleet, c *cutoverRun) {
		f = fl
		i := routerIndex(f, c.designated)
		d = f.routers[i]
		s.OnSpec(func(e machine.SpecEvent) {
			if e.Spec != cutover.Spec || e.Action != "Finalize" || !crashed {
				return
			}
			// Finalize begins: the serving period ends. d must have served it on the
			// stored generation's layout, unless it still routes by what it read when it
			// restarted after its CUTOVER and the machine said it could not check (the
			// Alert comes with the commands of the step that emitted this event).
			s.After(0, detsim.Label{Kind: "check", What: "designated at finalize"}, func() {
				last := d.Loads[len(d.Loads)-1]
				if want := hostsOf(f.store.Current(dbRef).Layout); !alerted && last.Why == "start" && !slices.Equal(d.Routes(db), want) {
					w.violate(&detsim.Violation{Invariant: check.InvDesignatedWritable, T: s.Now(),
						Detail: fmt.Sprintf("finalize began with the designated instance %s routing to %v (read at its restart at t=%d, generation %d) while the store routes to %v; no Alert said its check failed",
							d.ID, d.Routes(db), last.T, last.Generation, want)})
				}
			})
		})
		closedLoop(f, c, i, "desg", 20_000, 2000)
	}
	w.answers = func(back func(cutover.Input), in cutover.Input) {
		back(in)
		if r, ok := in.(cutover.Reply); ok && r.Err == nil && !crashed && strings.Contains(r.Step, "/cutover/") && !strings.Contains(r.Step, "/reverse") {
			crashed = true
			d.Crash()
			d.Boot() // at once: before the files of the new generation are written
			s.Probe("window.restart.routes_source")
		}
	}
	w.intercept = func(cmd cutover.Command, back func(cutover.Input)) bool {
		switch x := cmd.(type) {
		case cutover.Alert:
			if strings.Contains(x.Step, "/check") {
				alerted = true
			}
		case cutover.ListTasks:
			if blind && crashed && x.Instance == d.ID {
				s.Probe("window.restart.check_blind")
				refuseAdmin(s, d.ID, "ShowTasks", func(err error) { back(cutover.TasksListed{Step: x.Step, Err: err}) })
				return true
			}
		}
		return false
	}
	w.check = func(*cutoverRun) *detsim.Violation { return w.violation }
	return w
}

// lateWindow: see CutoverWindows (window 3). The links from the controller to the shards
// are slow too (10 to 30 times), so fences time out and their retries are long in flight.
func lateWindow(s *detsim.Sim) *cutoverWindow {
	w := &cutoverWindow{}
	retry := int64(0)
	w.options = func(o *cutover.Options, _ int) {
		o.Attempts = 2 // a failure counted twice gives the step up
		retry = o.RetryAfter
	}
	w.setup = func(f *fleet, c *cutoverRun) {
		slow := s.Between(10, 30)
		for _, b := range f.order {
			s.Net.Slow(c.d.ctl.Node, b.Node, slow)
		}
	}
	w.answers = func(back func(cutover.Input), in cutover.Input) { lateReplies(s, retry, back)(in) }
	return w
}

// answerErr is the error an answer of the cutover's world carries.
func answerErr(in cutover.Input) error {
	switch x := in.(type) {
	case cutover.Reply:
		return x.Err
	case cutover.RecordWritten:
		return x.Err
	case cutover.CopyStarted:
		return x.Err
	case cutover.CopyPolled:
		return x.Err
	case cutover.TasksListed:
		return x.Err
	}
	return nil
}
