package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
)

// daemon is the reference daemon as the simulator plays it: a controller process that
// watches the shard map record and hands every new generation to the ConfigPush machine
// (and re-hands the latest one now and then, as a reconcile loop does), executing the
// machine's commands over the simulated network against the models.
type daemon struct {
	f      *fleet
	ctl    *detsim.Controller
	push   *detsim.Host[configpush.Input, configpush.Command]
	latest *shardmap.Record // the newest record the watch returned
	twoPC  bool
	// outcomes is every push outcome, for probes and checkers.
	outcomes []configpush.Outcome
	// onOutcome, when set, is called with every outcome (tiny scenarios chain on it).
	onOutcome func(configpush.Outcome)
	// noReconcile is the mutant daemon that never reads the record again.
	noReconcile bool
	// busy, when set and true, holds pushes back: a cutover of the database is running.
	busy func() bool
	// pushed holds the generations whose push ended (not refused): nothing of it is in
	// flight any more.
	pushed map[uint64]bool
	// steps checks ConfigPush's step invariants on every command executed, with the code
	// the machine's world test runs (check.Steps); stepViolation is the first it found.
	steps         *check.Steps
	stepTimeout   int64
	stepViolation *detsim.Violation
	awaitFiles    bool // the machine's Options.AwaitFiles: check.ReloadSeen applies
}

// reconcileEvery is how often the daemon pushes the latest record again.
const reconcileEvery = 15_000

// newDaemon starts the controller process; withPush hosts the ConfigPush machine on it.
func newDaemon(f *fleet, opts configpush.Options, twoPC bool) *daemon {
	d := &daemon{f: f, twoPC: twoPC}
	d.ctl = detsim.NewController(f.s, "ctl")
	d.hostPush(opts)
	return d
}

// newController starts a controller process hosting nothing yet.
func newController(f *fleet) *daemon {
	return &daemon{f: f, ctl: detsim.NewController(f.s, "ctl")}
}

func (d *daemon) hostPush(opts configpush.Options) {
	d.steps, d.stepTimeout, d.awaitFiles = check.NewSteps(), opts.WithDefaults().StepTimeout.Milliseconds(), opts.AwaitFiles
	d.push = detsim.NewHost[configpush.Input, configpush.Command](d.ctl, configpush.New(opts), detsim.HostConfig[configpush.Input, configpush.Command]{
		Name:       "configpush",
		Exec:       d.execPush,
		TimerFired: func(id string) configpush.Input { return configpush.TimerFired{ID: id} },
		Restarted:  configpush.Restarted{},
		Save:       saveBy[configpush.Input, configpush.Command]("configpush", func(s configpush.Snapshot) (*configpush.Machine, error) { return configpush.Restore(s, opts) }),
	})
}

// start begins watching the record and reconciling. A controller restart starts them again.
func (d *daemon) start() {
	s := d.f.s
	inc := s.Net.Incarnation(d.ctl.Node)
	d.watch(0, inc)
	var reconcile func()
	reconcile = func() {
		if s.Net.Incarnation(d.ctl.Node) != inc {
			return
		}
		// Read the record again (a watch answer can be lost) and push the newest one known:
		// the machine retries stuck instances and adds missing ones on a repeated push.
		st := d.f.store
		s.Net.Call(d.ctl.Node, d.f.storeNode, "read", detsim.Idempotent,
			func(rep detsim.Reply) { r, err := st.Read(dbRef); rep(r, err) },
			func(v any, err error) {
				if err == nil {
					if r := v.(*shardmap.Record); d.latest == nil || r.Version > d.latest.Version {
						d.latest = r
					}
				}
				if d.latest != nil {
					d.pushRecord(d.latest)
				}
			})
		s.After(reconcileEvery, detsim.Label{Kind: "reconcile", To: "ctl"}, reconcile)
	}
	if !s.Exploring() && !d.noReconcile { // a tiny run is shorter than one period
		s.After(reconcileEvery, detsim.Label{Kind: "reconcile", To: "ctl"}, reconcile)
	}
	s.OnHeal(func() {
		if s.Net.Up(d.ctl.Node) && s.Net.Incarnation(d.ctl.Node) != inc {
			d.start()
		}
	})
}

// watch long-polls the store for a version above after.
func (d *daemon) watch(after uint64, inc uint64) {
	s := d.f.s
	if s.Net.Incarnation(d.ctl.Node) != inc || !s.Net.Up(d.ctl.Node) {
		return
	}
	st := d.f.store
	s.Net.Call(d.ctl.Node, d.f.storeNode, "watch v"+strconv.FormatUint(after, 10), detsim.Idempotent|detsim.LongPoll,
		func(rep detsim.Reply) { st.Watch(dbRef, after, func(r *shardmap.Record) { rep(r, nil) }) },
		func(v any, err error) {
			if err != nil {
				s.After(200, detsim.Label{Kind: "rewatch", To: "ctl"}, func() { d.watch(after, inc) })
				return
			}
			r := v.(*shardmap.Record)
			if d.latest == nil || r.Version > d.latest.Version {
				d.latest = r
			}
			d.pushRecord(r)
			d.watch(r.Version, inc)
		})
}

// pushRecord hands the machine a Push of the record's published generation, unless a
// cutover is in progress (the record says so, or the daemon runs one: a reverse publishes a
// serving record before it resumes anyone): then the cutover machine writes the files and
// reloads the instances itself, and never reloads the designated instance after its
// CUTOVER (a reload would rebuild the pools the reverse stream uses), so the daemon leaves
// the record alone until the cutover is done.
func (d *daemon) pushRecord(r *shardmap.Record) {
	if d.push == nil || r.State.Phase == shardmap.CuttingOver || (d.busy != nil && d.busy()) {
		return
	}
	d.push.Feed(configpush.Push{Record: r, Generation: r.Generation, Files: model.Render(r, d.twoPC), Instances: d.f.routerIDs()})
}

// execPush executes one configpush command over the network.
func (d *daemon) execPush(cmd configpush.Command) {
	s, f := d.f.s, d.f
	back := d.push.Caller()
	switch c := cmd.(type) {
	case configpush.WriteFiles:
		var published uint64
		if cur := f.store.Current(dbRef); cur != nil {
			published = cur.Generation
		}
		// The controller's clock, which the machine's step deadlines are on (it jumps).
		now := d.ctl.Now()
		d.report(d.steps.WriteFiles(now, c.Step, c.Generation, published, now+d.stepTimeout))
		s.Net.Call(d.ctl.Node, f.files.Node, "write g"+strconv.FormatUint(c.Generation, 10), detsim.Idempotent,
			func(rep detsim.Reply) {
				err := f.files.Write(c.Generation, c.Files)
				if err == nil {
					d.steps.Written(c.Generation)
				}
				if errors.Is(err, model.ErrNewerGeneration) {
					err = fmt.Errorf("%w: %w", configpush.ErrNewerGeneration, err)
				}
				rep(nil, err)
			},
			func(_ any, err error) {
				d.steps.Answered(c.Step)
				back(configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: err})
			})
	case configpush.Reload:
		d.report(d.steps.Reload(d.ctl.Now(), c.Instance, c.Generation))
		r := f.router(c.Instance)
		if d.awaitFiles {
			sees, _ := f.files.ReadAs(r.ID)
			d.report(check.ReloadSeen(d.ctl.Now(), c.Instance, c.Generation, sees))
		}
		s.Net.Call(d.ctl.Node, r.Node, "reload g"+strconv.FormatUint(c.Generation, 10), detsim.Idempotent,
			func(rep detsim.Reply) { a, err := r.Reload(); rep(a, err) },
			func(_ any, err error) {
				back(configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Err: err})
			})
	case configpush.AwaitFiles:
		// What the pod's directory shows (Files.ProjectionDelay models the kubelet).
		r := f.router(c.Instance)
		s.Net.Call(d.ctl.Node, r.Node, "files?", detsim.Idempotent,
			func(rep detsim.Reply) { g, _ := f.files.ReadAs(r.ID); rep(g, nil) },
			func(v any, err error) {
				var g uint64
				if err == nil {
					g = v.(uint64)
				}
				back(configpush.FilesSeen{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: g, Err: err})
			})
	case configpush.Observe:
		r := f.router(c.Instance)
		s.Net.Call(d.ctl.Node, r.Node, "observe", detsim.Idempotent,
			func(rep detsim.Reply) { rep(r.Observe(), nil) },
			func(v any, err error) {
				var o adapters.Observed
				if err == nil {
					o = v.(adapters.Observed)
				}
				back(configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance,
					Generation: o.Generation, Known: o.GenerationKnown, Err: err})
			})
	case configpush.Outcome:
		d.steps.Outcome(c.Generation, c.Refused != "")
		d.report(check.Confirmed(d.ctl.Now(), c.Generation, c.Confirmed, func(id string) uint64 { return f.router(id).Generation() }))
		d.outcomes = append(d.outcomes, c)
		if c.Refused == "" {
			if d.pushed == nil {
				d.pushed = map[uint64]bool{}
			}
			d.pushed[c.Generation] = true
		}
		if d.onOutcome != nil {
			defer d.onOutcome(c)
		}
		switch {
		case c.Refused != "":
			s.Probe("push.refused")
		case c.SupersededBy != 0:
			s.Probe("push.superseded")
		case len(c.Stuck) > 0:
			s.Probe("push.stuck")
		case len(c.Unknown) > 0:
			s.Probe("push.unknown")
		}
	default:
		panic(fmt.Sprintf("scenario: configpush command %T has no executor", cmd))
	}
}

// report keeps the first step violation.
func (d *daemon) report(v *detsim.Violation) {
	if d.stepViolation == nil {
		d.stepViolation = v
	}
}

// checkSteps is the first step violation of the daemon's ConfigPush, if it hosts one.
func (d *daemon) checkSteps() *detsim.Violation {
	if d == nil || d.steps == nil {
		return nil
	}
	return d.stepViolation
}

func (f *fleet) routerIDs() []string {
	ids := make([]string, len(f.routers))
	for i, r := range f.routers {
		ids[i] = r.ID
	}
	return ids
}

func (f *fleet) router(id string) *model.Router {
	i := slices.IndexFunc(f.routers, func(r *model.Router) bool { return r.ID == id })
	if i < 0 {
		panic("scenario: no router " + id)
	}
	return f.routers[i]
}

// operator changes the record like an operator's tool would: read, change, compare-and-set,
// re-reading and trying again on a conflict (three attempts). then, if given, runs when the
// tool is done, whatever the outcome.
func (f *fleet) operator(change func(cur *shardmap.Record) *shardmap.Record, what string, then ...func()) {
	s := f.s
	var try func(left int)
	try = func(left int) {
		s.Net.Call(f.operatorNode, f.storeNode, "cas "+what, 0,
			func(rep detsim.Reply) {
				cur, err := f.store.Read(dbRef)
				if err != nil {
					rep(nil, err)
					return
				}
				next := change(cur)
				if next == nil {
					rep(nil, nil) // nothing to do in this state
					return
				}
				v, err := f.store.CAS(dbRef, cur.Version, next)
				rep(v, err)
			},
			func(_ any, err error) {
				if err != nil && errors.Is(err, adapters.ErrConflict) && left > 1 {
					s.Probe("operator.retry")
					try(left - 1)
					return
				}
				for _, f := range then {
					f()
				}
			})
	}
	try(3)
}
