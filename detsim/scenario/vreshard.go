package scenario

import (
	"fmt"
	"slices"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/vreshard"
)

// The vreshard scenario's invariants (check.InvVReshard*, shared with machine/vreshard's
// world test) and mutants. Under heavy writes (param heavy_writes) the streams lag by 10 to
// 25 s when the copy ends and catch up 0.5 to 1 s a second: the MaxLagMs gate is what keeps
// the stop of the writes short (check.InvVReshardWriteStop).
const (
	// MutantVReshardSkipVDiff switches without a VDiff (vreshard.Mutants.SkipVDiff).
	MutantVReshardSkipVDiff = "vreshard-skip-vdiff"
	// MutantVReshardSkipMirror does not mirror the switch of the writes.
	MutantVReshardSkipMirror = "vreshard-skip-mirror"
	// MutantVReshardForgetSent makes a new VDiff after a restart in the VDiff step; the world
	// restarts the controller there when this mutant runs.
	MutantVReshardForgetSent = "vreshard-forget-sent"
	// MutantVReshardSkipHold completes as soon as vtgate's check passed
	// (vreshard.Mutants.SkipHold).
	MutantVReshardSkipHold = "vreshard-skip-hold"
	// MutantVReshardIgnoreLag counts the copy as caught up at any lag
	// (vreshard.Mutants.IgnoreLag).
	MutantVReshardIgnoreLag = "vreshard-ignore-lag"
	// MutantVReshardSkipVerify holds without the check through vtgate
	// (vreshard.Mutants.SkipVerify).
	MutantVReshardSkipVerify = "vreshard-skip-verify"
	// MutantVReshardRewriteSame writes a record that already mirrors Vitess
	// (vreshard.Mutants.RewriteSame).
	MutantVReshardRewriteSame = "vreshard-rewrite-same"
)

// VReshard is machine/vreshard on the controller resharding keyspace db's shard 0 into -80
// and 80- through a vtctld model, under lost, duplicated and slow messages, controller
// restarts (the machine restored from its snapshot) and store conflicts.
var VReshard = detsim.Scenario{
	Name:   "vreshard",
	Points: []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset", "store.cas.conflict", "ctl.restart", "writes.heavy"},
	Probes: []string{"fault:store.cas.conflict", "fault:ctl.restart", "fault:writes.heavy", "VitessReshard.Done", "VitessReshard.Retry", "VitessReshard.Restart", "vreshard.hold", "vreshard.lag_wait"},
	Mutants: []string{MutantVReshardSkipVDiff, MutantVReshardSkipMirror, MutantVReshardForgetSent, MutantVReshardSkipHold, MutantVReshardIgnoreLag,
		MutantVReshardSkipVerify, MutantVReshardRewriteSame},
	World: vreshardWorld,
}

type vreshardRun struct {
	s         *detsim.Sim
	ctl       *detsim.Controller
	store     *model.Store
	storeNode detsim.NodeID
	vt        *model.Workflows
	host      *detsim.Host[vreshard.Input, vreshard.Command]
	done      *vreshard.Done
	violation *detsim.Violation
	chk       *check.Reshard
	held      bool // the machine reached the hold after the switch
	finalized bool // the operator's Finalize reached the controller
	verified  bool // a check through vtgate passed on the partition vtgate serves
}

// report keeps the first violation.
func (r *vreshardRun) report(v *detsim.Violation) {
	if r.violation == nil {
		r.violation = v
	}
}

func vreshardWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	r := &vreshardRun{s: s, store: model.NewStore(s), chk: check.NewReshard(maxLagMs)}
	r.storeNode = s.Net.AddNode("store")
	r.vt = model.NewWorkflows(s, "vtctld", db, []string{"0"}, []string{"-80", "80-"})
	r.vt.OnEffect = func(step string) {
		r.report(r.chk.Effect(s.Now(), step))
		if step == "complete" {
			r.report(r.chk.Completed(s.Now(), r.verified, r.finalized))
		}
	}
	r.vt.OnWritesSwitched = func(clean bool, stopMs int64) { r.report(r.chk.WritesSwitched(s.Now(), clean, stopMs)) }
	r.vt.CopyPolls = s.Param("copy_polls", 1+s.Intn(4))
	// Heavy writes in half the seeds, and wherever the swarm turns writes.heavy on.
	heavy := s.Intn(2)
	if s.Fault("writes.heavy") {
		heavy = 1
	}
	if s.Param("heavy_writes", heavy) == 1 {
		r.vt.Backlog, r.vt.Drain = int64(s.Param("backlog_ms", 10_000+s.Intn(15_001))), int64(s.Param("drain_ms", 500+s.Intn(501)))
	}
	rec, err := shardmap.NewVindex(db, shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.VindexHash,
		shardmap.Backend{Host: "db-0", Port: 3306, Database: db, Tablet: "zone1-0000000100"})
	if err != nil {
		panic(err)
	}
	rec.Shards[0].Name = "0"
	v := rec.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	rec.Layout.Scheme = v
	if _, err := r.store.CAS(dbRef, 0, rec); err != nil {
		panic(err)
	}
	rec, _ = r.store.Read(dbRef)
	r.ctl = detsim.NewController(s, "ctl")
	mu := vreshard.Mutants{SkipVDiff: mutant == MutantVReshardSkipVDiff, SkipMirror: mutant == MutantVReshardSkipMirror, ForgetSent: mutant == MutantVReshardForgetSent,
		SkipHold: mutant == MutantVReshardSkipHold, IgnoreLag: mutant == MutantVReshardIgnoreLag,
		SkipVerify: mutant == MutantVReshardSkipVerify, RewriteSame: mutant == MutantVReshardRewriteSame}
	r.host = detsim.NewHost[vreshard.Input, vreshard.Command](r.ctl, vreshard.New(), detsim.HostConfig[vreshard.Input, vreshard.Command]{
		Name:       "vreshard",
		Exec:       r.exec,
		TimerFired: func(id string) vreshard.Input { return vreshard.TimerFired{ID: id} },
		Restarted:  vreshard.Restarted{},
		Save:       saveBy[vreshard.Input, vreshard.Command]("vreshard", vreshard.Restore),
	})
	forced := false
	// The operator watches the target serve for a while in the hold, then finalizes, asking
	// again until the reshard ends (as the controller forwards `cutover finalize` every poll:
	// a controller down or restarted in between takes it later; outside the hold it is
	// ignored).
	var finalize func()
	finalize = func() {
		if r.done != nil {
			return
		}
		if r.host.Feed(vreshard.Finalize{}) {
			r.finalized = true
		}
		s.After(1000, detsim.Label{Kind: "op", What: "finalize again"}, finalize)
	}
	s.OnSpec(func(e machine.SpecEvent) {
		if e.Spec == vreshard.Spec && e.Action == vreshard.ActHold && !r.held {
			r.held = true
			s.Probe("vreshard.hold")
			s.After(s.Between(1000, 10_000), detsim.Label{Kind: "op", What: "finalize"}, finalize)
		}
		if e.Spec == vreshard.Spec && e.Action == vreshard.ActCopy {
			if lag, ok := e.Get("lag_ms"); ok && lag.Int() > maxLagMs {
				s.Probe("vreshard.lag_wait") // the gate holds the machine: the copy has not caught up
			}
		}
		if e.Spec == vreshard.Spec && e.Action == vreshard.ActVDiff && mutant == MutantVReshardForgetSent && !forced {
			forced = true // restart the controller in the VDiff step, as ctl.restart may
			s.After(1, detsim.Label{Kind: "crash", To: "ctl"}, func() {
				r.ctl.Crash()
				s.After(100, detsim.Label{Kind: "boot", To: "ctl"}, r.ctl.Boot)
			})
		}
	})
	s.OnHeal(func() { r.ctl.Boot() })
	start := vreshard.Start{Record: rec, Workflow: "split", Cell: "zone1", Source: []string{"0"}, Target: []string{"-80", "80-"},
		Backends: map[string]shardmap.Backend{"-80": {Host: "db-1", Port: 3306, Database: db, Tablet: "zone1-0000000200"},
			"80-": {Host: "db-2", Port: 3306, Database: db, Tablet: "zone1-0000000300"}},
		Options: vreshard.Options{MaxLagMs: maxLagMs, PollEvery: int64(s.Param("poll_ms", 200+s.Intn(800))), RetryAfter: int64(s.Param("retry_ms", 100+s.Intn(400))), Attempts: 3, Mutants: mu}}
	var ask func()
	ask = func() { // the operator asks until the controller has taken it
		if !r.host.Feed(start) {
			s.After(1000, detsim.Label{Kind: "op", What: "start reshard again"}, ask)
		}
	}
	s.At(s.Between(0, 2000), detsim.Label{Kind: "op", What: "start reshard"}, ask)
	s.SetWorkload(1, func(int) string { return "reshard 0 -> -80,80-" })
	s.StartNemesis()
	end := s.Options().Net.FaultWindow + 120_000
	if n := s.Run(end, 200_000); n == 200_000 {
		return &detsim.Violation{Invariant: "step-budget", T: s.Now(), Detail: "the reshard did not settle in 200000 steps"}
	}
	if v := detsim.Pruned(s); v != nil {
		return v
	}
	if r.violation != nil {
		return r.violation
	}
	cur, _ := r.store.Read(dbRef)
	switch {
	case r.done == nil:
		return &detsim.Violation{Invariant: check.InvVReshardMirror, T: s.Now(), Detail: "the reshard did not end once the faults healed"}
	case r.done.Outcome != vreshard.Completed || !r.vt.Completed():
		return &detsim.Violation{Invariant: check.InvVReshardMirror, T: s.Now(), Detail: "the reshard ended " + r.done.String()}
	case !slices.Equal(check.ShardNames(cur.Layout), r.vt.Primary()) || cur.Target != nil || cur.State.Phase != shardmap.Serving:
		return &detsim.Violation{Invariant: check.InvVReshardMirror, T: s.Now(), Detail: fmt.Sprintf("the record has %v (target %v, %v), vtgate serves %v", check.ShardNames(cur.Layout), cur.Target != nil, cur.State.Phase, r.vt.Primary())}
	}
	s.Probe("vreshard.completed")
	return nil
}

// maxLagMs is the reshard's MaxLagMs (the default).
const maxLagMs = 5000

// progress is a Status answer on the wire.
type progress struct {
	copying bool
	lag     int64
}

// exec is driver.VReshardExecutor over the simulated network: each command a call from the
// controller to vtctld (or the store), whose answer is fed back if the controller still
// runs the incarnation that asked.
func (r *vreshardRun) exec(cmd vreshard.Command) {
	s, vt := r.s, r.vt
	ctl := r.ctl.Node
	back := r.host.Caller()
	reply := func(step string, attempt int) func(any, error) {
		return func(_ any, err error) { back(vreshard.Reply{Step: step, Attempt: attempt, Err: err}) }
	}
	switch c := cmd.(type) {
	case vreshard.Inspect:
		s.Net.Call(ctl, vt.Node, "inspect", detsim.Idempotent, func(rep detsim.Reply) { rep(nil, nil) }, func(_ any, err error) {
			f := vreshard.Facts{Sharded: true, Tables: []vreshard.TableFacts{{Name: "t", PrimaryVindex: "hash"}},
				Shards:  []vreshard.ShardFacts{{Name: "0", Serving: true, Primary: "zone1-0000000100"}, {Name: "-80", Primary: "zone1-0000000200"}, {Name: "80-", Primary: "zone1-0000000300"}},
				Sources: []vreshard.BinlogFacts{{Shard: "0", Format: "ROW", Image: "FULL", GTID: true}}}
			back(vreshard.Inspected{Step: c.Step, Attempt: c.Attempt, Facts: f, Err: err})
		})
	case vreshard.ReadServing:
		s.Net.Call(ctl, vt.Node, "srvkeyspace", detsim.Idempotent, func(rep detsim.Reply) { rep(vt.Srv(), nil) }, func(x any, err error) {
			in := vreshard.Serving{Step: c.Step, Attempt: c.Attempt, Err: err}
			if err == nil {
				for _, sh := range x.([]adapters.SrvShard) {
					in.Primary = append(in.Primary, vreshard.SrvShard{Name: sh.Name, Range: sh.Range})
				}
			}
			back(in)
		})
	case vreshard.WriteRecord:
		st := r.store
		s.Net.Call(ctl, r.storeNode, "cas v"+strconv.FormatUint(c.Expect, 10), 0,
			func(rep detsim.Reply) {
				cur := st.Current(dbRef).Clone()
				v, err := st.CAS(dbRef, c.Expect, c.Record)
				if err == nil {
					r.report(check.Mirror(s.Now(), "record version "+strconv.FormatUint(v, 10), check.ShardNames(c.Record.Layout), vt.Primary()))
					r.report(check.RecordChanges(s.Now(), c.Step, cur, c.Record))
				}
				rep(v, err)
			},
			func(x any, err error) {
				in := vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: err}
				in.Version, in.Conflict = written(x, err)
				back(in)
			})
	case vreshard.Create:
		s.Net.Call(ctl, vt.Node, "create", 0, func(rep detsim.Reply) { vt.Create(); rep(nil, nil) }, reply(c.Step, c.Attempt))
	case vreshard.Status:
		s.Net.Call(ctl, vt.Node, "status", detsim.Idempotent, func(rep detsim.Reply) {
			cp, lag, err := vt.Status()
			rep(progress{cp, lag}, err)
		}, func(x any, err error) {
			in := vreshard.Progress{Step: c.Step, Attempt: c.Attempt, Err: err}
			if err == nil {
				p := x.(progress)
				in.Copying, in.LagMs = p.copying, p.lag
			}
			back(in)
		})
	case vreshard.VDiff:
		s.Net.Call(ctl, vt.Node, "vdiff "+c.UUID, 0, func(rep detsim.Reply) { d, err := vt.VDiff(c.UUID); rep(d, err) }, func(x any, err error) {
			in := vreshard.Diffed{Step: c.Step, Attempt: c.Attempt, Err: err}
			if err == nil {
				in.Done = x.(bool)
			}
			back(in)
		})
	case vreshard.Switch:
		s.Net.Call(ctl, vt.Node, "switch", 0, func(rep detsim.Reply) { rep(nil, vt.Switch(c.Types, c.Reverse)) }, reply(c.Step, c.Attempt))
	case vreshard.Verify:
		s.Net.Call(ctl, vt.Node, "verify", detsim.Idempotent, func(rep detsim.Reply) {
			cur, _ := r.store.Read(dbRef)
			v := check.Mirror(s.Now(), "checking through vtgate", check.ShardNames(cur.Layout), vt.Primary())
			r.report(v)
			r.verified = r.verified || v == nil && slices.Equal(c.Shards, vt.Primary())
			rep(nil, nil)
		}, reply(c.Step, c.Attempt))
	case vreshard.Complete:
		s.Net.Call(ctl, vt.Node, "complete", 0, func(rep detsim.Reply) { rep(nil, vt.Complete()) }, reply(c.Step, c.Attempt))
	case vreshard.Cancel:
		s.Net.Call(ctl, vt.Node, "cancel", 0, func(rep detsim.Reply) { rep(nil, vt.Cancel()) }, reply(c.Step, c.Attempt))
	case vreshard.Alert:
		s.Probe("vreshard.alert")
	case vreshard.Done:
		if r.done == nil {
			d := c
			r.done = &d
		}
	default:
		panic(fmt.Sprintf("scenario: vreshard command %T has no executor", cmd))
	}
}
