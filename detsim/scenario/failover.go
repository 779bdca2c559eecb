package scenario

import (
	"errors"
	"fmt"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/failover"
)

// Failover is the failover machine (§9.1, machine/failover) repointing a shard after its
// standby was promoted, under append traffic, for both engines (drawn per seed):
//
//   - PgDog: the machine fences the old primary, writes the record by compare-and-set and
//     hands the new generation to ConfigPush on the same daemon (the executor's Push, as
//     driver.PushHandoff does), which writes the files and reloads every instance; the
//     daemon's own watch pushes every record too.
//   - Vitess: the machine fences the old primary, reparents the promoted tablet through
//     vtctld (model.Vtctld: TabletExternallyReparented) and then writes the record, which
//     mirrors Vitess's topology; vtgates (model.VTGate) route by the topology and learn a
//     reparent from vtctld's message or their periodic refresh.
//
// The standby follows the old primary synchronously (model.Standby), so an acknowledged
// write is on the standby when it is promoted. The promoter (Loam's W3, outside this
// machine) either found the old primary dead (it stays down) or promoted the standby while
// the old primary still runs and takes writes (it was cut off from the promoter only); the
// machine then has to fence it. Meanwhile an operator's tool bumps the record's generation
// (the compare-and-set races other writers), routers crash and reload with failures, the
// store injects conflicts, the files target refuses writes, vtctld answers Unavailable,
// backends restart, the daemon restarts and its clock jumps, links misbehave.
//
// Checked: no acknowledged write lost (and no phantom) across the failover; at every
// instant at most one writable primary routed per shard (except once the machine has told
// the operator it could not fence the old primary: the split is then theirs to end);
// the record mirrors Vitess, never leading it; generations only increase and files only
// for published generations; and once faults heal the failover ends repointed, with every
// router (or vtgate) routing the shard to the promoted primary.
var Failover = detsim.Scenario{
	Name: "failover",
	Points: []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset",
		"pgdog.crash", "pgdog.reload.after_parse", "backend.restart", "store.cas.conflict", "files.write.fail",
		"vtctld.reparent.fail", "ctl.restart", "clock.jump"},
	Probes: []string{"fault:vtctld.reparent.fail", "fault:backend.restart", "fault:store.cas.conflict", "fault:ctl.restart",
		"fault:pgdog.crash", "fault:pgdog.reload.after_parse", "fault:files.write.fail",
		"PrimaryFailover.Start", "PrimaryFailover.Fence", "PrimaryFailover.FenceSkipped", "PrimaryFailover.Reparent",
		"PrimaryFailover.Repoint", "PrimaryFailover.Rebase", "PrimaryFailover.Push", "PrimaryFailover.Restart",
		"PrimaryFailover.Done", "failover.old_alive", "failover.old_dead", "failover.alert", "failover.repointed",
		"failover.vitess", "failover.pgdog", "failover.conflict.repointed", "standby.sync_wait", "failover.old_took_write"},
	Mutants: []string{MutantFailoverSkipFence, MutantRecordBeforeReparent, MutantPushBeforeRecord,
		MutantKeepGeneration, MutantStandbyAsync, MutantClaimFenced},
	World: failoverWorld,
}

// The failover machine's mutants (failover.Mutants), and the world's.
const (
	// MutantFailoverSkipFence repoints without fencing the old primary: a router that has
	// not reloaded yet keeps writing to it while the others write to the promoted one.
	// Trips "one-writable-primary".
	MutantFailoverSkipFence = "failover-skip-fence"
	// MutantRecordBeforeReparent (Vitess) writes the record before
	// TabletExternallyReparented. Trips "record-mirrors-vitess".
	MutantRecordBeforeReparent = "failover-record-before-reparent"
	// MutantPushBeforeRecord (PgDog) hands the new generation to ConfigPush before it is
	// stored. Trips "files-only-published".
	MutantPushBeforeRecord = "failover-push-before-record"
	// MutantKeepGeneration repoints at the same generation: the store refuses the record
	// (routing changes, the generation must too), the machine retries for ever and the
	// routers never follow. Trips "converges".
	MutantKeepGeneration = "failover-keep-generation"
	// MutantStandbyAsync is a world whose standby replicates asynchronously: the old
	// primary acknowledges writes the standby does not have yet when it is promoted.
	// Trips "no-lost-ack".
	MutantStandbyAsync = "standby-async"
	// MutantClaimFenced reports the old primary fenced when its fence was given up on.
	// Trips "failover-done".
	MutantClaimFenced = "failover-claim-fenced"
)

func failoverMutants(mutant string) failover.Mutants {
	return failover.Mutants{
		SkipFence:            mutant == MutantFailoverSkipFence,
		RecordBeforeReparent: mutant == MutantRecordBeforeReparent,
		PushBeforeRecord:     mutant == MutantPushBeforeRecord,
		KeepGeneration:       mutant == MutantKeepGeneration,
		ClaimFenced:          mutant == MutantClaimFenced,
	}
}

// failoverRun is the failover world.
type failoverRun struct {
	f        *fleet
	d        *daemon
	cur      *attempt // the failover running now
	attempts int
	opts     failover.Options
	vitess   bool
	vt       *model.Vtctld
	gates    []*model.VTGate
	standby  *model.Standby
	old, neu *model.Backend
	// shard is the failing shard's name in the record, idx its position.
	shard    string
	idx      int
	promoted shardmap.Backend
	oldDead  bool
	// alerted: the machine told the operator it could not fence the old primary.
	alerted bool
	// promotedAt holds the generations the store took naming the promoted primary for the
	// shard, pushed the last generation handed to ConfigPush: for check.FailoverDone.
	promotedAt map[uint64]bool
	pushed     uint64
	violation  *detsim.Violation
	checked    uint64 // the last record version checked against Vitess
}

// attempt is one run of the failover machine. One that ends Failed (the record kept
// changing under it) is followed by another from the current record, as its Done reason
// tells the operator to do.
type attempt struct {
	host    *detsim.Host[failover.Input, failover.Command]
	start   *shardmap.Record // the record it started from
	started bool
	done    *failover.Done
}

func failoverWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	r := &failoverRun{f: f, promotedAt: map[uint64]bool{}}
	r.vitess = s.Param("vitess", s.Intn(2)) == 1
	switch mutant {
	case MutantRecordBeforeReparent:
		r.vitess = true // the mutant changes only the Vitess order
	case MutantPushBeforeRecord:
		r.vitess = false // and this one only PgDog's
	}
	if r.vitess {
		s.Probe("failover.vitess")
	} else {
		s.Probe("failover.pgdog")
	}
	shards := s.Param("shards", 1+s.Intn(2))
	r.idx = s.Param("failing_shard", s.Intn(shards))
	r.oldDead = s.Param("old_primary_dead", s.Intn(2)) == 1
	bs := f.backends(0, shards, false)
	standbyName := "standby-" + strconv.Itoa(r.idx)
	r.neu = model.NewBackend(s, standbyName, appRole)
	f.dir[standbyName] = r.neu
	r.old = f.dir[bs[r.idx].Host]
	r.standby = model.Follow(s, r.old, r.neu, mutant == MutantStandbyAsync, s.Between(50, 500))
	clients := s.Param("clients", 2+s.Intn(2))
	var rec *shardmap.Record
	if r.vitess {
		for i := range bs {
			bs[i].Port, bs[i].Tablet = 3306, tabletAlias(i)
		}
		var err error
		rec, err = shardmap.NewVindex(db, shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.VindexHash, bs...)
		if err != nil {
			panic(fmt.Sprintf("scenario: failover record: %v", err))
		}
		r.promoted = shardmap.Backend{Host: standbyName, Port: 3306, Database: db, Tablet: tabletAlias(10 + r.idx)}
		f.start(rec, false, 0, clients)
		r.vt = model.NewVtctld(s, "vtctld", db)
		var names []string
		for i, sh := range rec.Layout.Shards {
			r.vt.AddTablet(model.Tablet{Alias: sh.Backend.Tablet, Shard: sh.Name, Backend: sh.Backend.Host}, true)
			if i == r.idx {
				r.vt.AddTablet(model.Tablet{Alias: r.promoted.Tablet, Shard: sh.Name, Backend: standbyName}, false)
			}
			names = append(names, sh.Name)
		}
		for i := range s.Param("vtgates", 2+s.Intn(2)) {
			r.gates = append(r.gates, model.NewVTGate(s, "vtgate-"+strconv.Itoa(i), appRole, r.vt, f.dir, names, 5000))
		}
		r.d = newController(f)
	} else {
		rec = pgHash(1, bs)
		rec.Shards[r.idx].Backend.Replicas = []shardmap.Endpoint{{Host: standbyName, Port: 5432}}
		r.promoted = shardmap.Backend{Host: standbyName, Port: 5432, Database: db}
		f.start(rec, false, s.Param("instances", 2+s.Intn(2)), clients)
		r.d = newDaemon(f, configpush.Options{}, false)
		r.d.start()
	}
	r.shard = rec.Layout.Shards[r.idx].Name
	f.store.Committed = func(_ adapters.DBRef, rec *shardmap.Record) {
		if r.namesPromoted(rec) {
			r.promotedAt[rec.Generation] = true
		}
	}
	r.crashes()
	r.opts = failover.Options{
		RetryAfter: int64(s.Param("retry_after_ms", []int{100, 500}[s.Intn(2)])),
		Attempts:   s.Param("attempts", 1+s.Intn(3)),
		Mutants:    failoverMutants(mutant),
	}
	s.OnSpec(func(e machine.SpecEvent) {
		if e.Spec != failover.Spec {
			return
		}
		switch e.Action {
		case failover.ActFenceSkipped:
			r.alerted = true
		case failover.ActRepoint:
			for _, fl := range e.Fields {
				if fl.Key == "retry" {
					s.Probe("failover.conflict.repointed") // its own write, whose answer was lost, or an equal one
				}
			}
		}
	})
	s.OnStep(r.checkStep)
	failAt := int64(s.Param("fail_at_ms", int(s.Between(1000, 15_000))))
	s.At(failAt, detsim.Label{Kind: "promoter", What: "failure"}, r.fail)
	n := s.Param("ops", 20+s.Intn(41))
	s.SetWorkload(n, r.appends(n))
	for i := range s.Param("bumps", s.Intn(4)) {
		at := s.Between(0, s.Options().Net.FaultWindow)
		s.At(at, detsim.Label{Kind: "op", What: "bump", ID: int64(i + 1)}, func() {
			f.operator(func(cur *shardmap.Record) *shardmap.Record {
				next := cur.Clone()
				next.Generation++
				return next
			}, "bump")
		})
	}
	if v := f.runToEnd(60_000, 300_000); v != nil {
		return v
	}
	if r.violation != nil {
		return r.violation
	}
	return r.check()
}

// tabletAlias names tablet i of the keyspace.
func tabletAlias(i int) string {
	return adapters.TabletAlias{Cell: "zone1", UID: uint32(100 * (i + 1))}.String()
}

// crashes registers the instance and backend crashes (the old primary, once dead, stays
// down) and the heal hook that boots the rest.
func (r *failoverRun) crashes() {
	s, f := r.f.s, r.f
	s.OnNemesis("pgdog.crash", func() {
		if len(f.routers) == 0 {
			return
		}
		rt := f.routers[s.Intn(len(f.routers))]
		if !rt.Up() {
			return
		}
		rt.Crash()
		s.After(s.Between(100, 5_000), detsim.Label{Kind: "boot", To: rt.ID}, rt.Boot)
	})
	servers := append(append([]*model.Backend(nil), f.order...), r.neu)
	s.OnNemesis("backend.restart", func() {
		b := servers[s.Intn(len(servers))]
		if !s.Net.Up(b.Node) || (b == r.old && r.oldDead) {
			return
		}
		b.Crash()
		s.After(s.Between(50, 3_000), detsim.Label{Kind: "boot", To: b.Name}, func() {
			if b != r.old || !r.oldDead {
				b.Boot()
			}
		})
	})
	s.OnHeal(func() {
		for _, b := range servers {
			if b != r.old || !r.oldDead {
				b.Boot()
			}
		}
		for _, rt := range f.routers {
			rt.Boot()
		}
	})
}

// begin starts a failover attempt: a machine on the daemon, and the request to it.
func (r *failoverRun) begin() {
	s := r.f.s
	if !s.Net.Up(r.d.ctl.Node) {
		// The daemon hosts a machine from its start: wait for its process.
		s.After(500, detsim.Label{Kind: "promoter", What: "wait for the daemon"}, r.begin)
		return
	}
	r.attempts++
	name := "failover"
	if r.attempts > 1 {
		name += "-" + strconv.Itoa(r.attempts)
		s.Probe("failover.retried")
	}
	a := &attempt{}
	a.host = detsim.NewHost[failover.Input, failover.Command](r.d.ctl, failover.New(), detsim.HostConfig[failover.Input, failover.Command]{
		Name:       name,
		Exec:       func(c failover.Command) { r.exec(a, c) },
		TimerFired: func(id string) failover.Input { return failover.TimerFired{ID: id} },
		Restarted:  failover.Restarted{},
		Save:       saveBy[failover.Input, failover.Command]("failover", failover.Restore),
	})
	r.cur = a
	r.ask(a)
}

// fail is the promoter: the old primary dies (or is cut off from the promoter only), the
// standby is promoted a little later, and the daemon is asked to repoint the shard.
func (r *failoverRun) fail() {
	s := r.f.s
	if r.oldDead {
		s.Probe("failover.old_dead")
		r.old.Crash()
	} else {
		s.Probe("failover.old_alive")
	}
	s.After(s.Between(200, 2000), detsim.Label{Kind: "promoter", What: "promote", To: r.neu.Name}, func() {
		r.standby.Promote()
		r.begin()
	})
}

// ask is the request to repoint: the daemon reads the record and starts the attempt's
// machine with it, asked again every second until it has.
func (r *failoverRun) ask(a *attempt) {
	s, f := r.f.s, r.f
	if a.started {
		return
	}
	s.After(1000, detsim.Label{Kind: "promoter", What: "ask"}, func() { r.ask(a) })
	if !s.Net.Up(r.d.ctl.Node) {
		return
	}
	inc := s.Net.Incarnation(r.d.ctl.Node)
	st := f.store
	s.Net.Call(r.d.ctl.Node, f.storeNode, "read", detsim.Idempotent,
		func(rep detsim.Reply) { x, err := st.Read(dbRef); rep(x, err) },
		func(x any, err error) {
			if err != nil || a.started || s.Net.Incarnation(r.d.ctl.Node) != inc {
				return
			}
			rec := x.(*shardmap.Record)
			if a.host.Feed(failover.Start{Record: rec, Shard: r.shard, Promoted: r.promoted, Role: appRole, Options: r.opts}) {
				a.started, a.start = true, rec
			}
		})
}

// exec executes one command of attempt a over the network, as driver.FailoverExecutor
// does.
func (r *failoverRun) exec(a *attempt, cmd failover.Command) {
	s, f := r.f.s, r.f
	ctl := r.d.ctl.Node
	back := a.host.Caller()
	switch c := cmd.(type) {
	case failover.FenceOld:
		b := f.dir[c.Backend.Host]
		s.Net.Call(ctl, b.Node, "fence", detsim.Settled,
			func(rep detsim.Reply) { rep(nil, b.FenceWrites(c.Role)) },
			func(_ any, err error) { back(failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}) })
	case failover.Reparent:
		s.Net.Call(ctl, r.vt.Node, "reparent "+c.Tablet, detsim.Idempotent,
			func(rep detsim.Reply) {
				_, err := r.vt.TabletExternallyReparented(c.Keyspace, c.Shard, c.Tablet)
				rep(nil, err)
			},
			func(_ any, err error) { back(failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}) })
	case failover.WriteRecord:
		st := f.store
		s.Net.Call(ctl, f.storeNode, "cas v"+strconv.FormatUint(c.Expect, 10), 0,
			func(rep detsim.Reply) { v, err := st.CAS(dbRef, c.Expect, c.Record); rep(v, err) },
			func(x any, err error) {
				in := failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: err}
				in.Version, in.Conflict = written(x, err)
				back(in)
			})
	case failover.Push:
		// The hand-off to ConfigPush on the same daemon: it has the push once fed.
		ok := r.d.push.Feed(configpush.Push{Record: c.Record.Clone(), Generation: c.Generation,
			Files: model.Render(c.Record, false), Instances: f.routerIDs()})
		var err error
		if !ok {
			err = errors.New("scenario: ConfigPush's process is down")
		} else {
			r.pushed = c.Generation
		}
		s.After(0, detsim.Label{Kind: "handoff", To: "failover", What: "g" + strconv.FormatUint(c.Generation, 10)}, func() {
			back(failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err})
		})
	case failover.Alert:
		s.Probe("failover.alert")
	case failover.Done:
		if a.done == nil {
			d := c
			a.done = &d
			r.checkDone(a, c)
			s.Probe("failover." + c.Outcome.String())
			if c.Outcome == failover.Failed && a == r.cur {
				s.After(s.Between(1000, 5000), detsim.Label{Kind: "op", What: "retry failover"}, r.begin)
			}
		}
	default:
		panic(fmt.Sprintf("scenario: failover command %T has no executor", cmd))
	}
}

// namesPromoted reports whether rec names the promoted primary for the failing shard.
func (r *failoverRun) namesPromoted(rec *shardmap.Record) bool {
	for _, sh := range rec.Layout.Shards {
		if sh.Name == r.shard {
			return sh.Backend.Host == r.promoted.Host && sh.Backend.Port == r.promoted.Port
		}
	}
	return false
}

// checkDone holds attempt a's Done against the world (check.FailoverDone).
func (r *failoverRun) checkDone(a *attempt, d failover.Done) {
	if r.violation != nil || a.start == nil {
		return
	}
	var old shardmap.Backend
	for _, sh := range a.start.Layout.Shards {
		if sh.Name == r.shard {
			old = sh.Backend
		}
	}
	r.violation = check.FailoverDone(r.f.s.Now(), check.FailoverEnd{Done: d, StartGeneration: a.start.Generation,
		OldFenced: r.old.Fenced(appRole), SamePlace: old.Host == r.promoted.Host && old.Port == r.promoted.Port,
		FenceAlerted: r.alerted, StoredPromoted: r.promotedAt[d.Generation], PgDog: !r.vitess, Pushed: r.pushed,
		Reparented: r.vitess && r.vt.Primary(r.shard) == r.promoted.Tablet})
}

// writable reports whether a server takes the application's writes now: up, the role may
// log in, and a primary (the standby is read-only until promoted).
func (r *failoverRun) writable(name string) bool {
	b := r.f.dir[name]
	if b == nil || !r.f.s.Net.Up(b.Node) || b.Fenced(appRole) {
		return false
	}
	return b != r.neu || r.standby.Promoted()
}

// checkStep runs after every event: at most one writable primary routed for the failing
// shard, and the stored record never ahead of Vitess.
func (r *failoverRun) checkStep() {
	if r.violation != nil {
		return
	}
	s, f := r.f.s, r.f
	if !r.alerted {
		routed := map[string]string{}
		for _, rt := range f.routers {
			if routes := rt.Routes(db); rt.Up() && len(routes) > r.idx {
				routed[rt.ID] = routes[r.idx]
			}
		}
		for _, g := range r.gates {
			routed[g.ID] = g.Routes(r.shard)
		}
		r.violation = check.OneWritablePrimary(r.shard, routed, r.writable, s.Now())
	}
	if cur := f.store.Current(dbRef); r.violation == nil && r.vitess && cur.Version != r.checked {
		r.checked = cur.Version
		r.violation = check.RecordMirrorsVitess(cur, r.vt, s.Now())
	}
}

// appends generates n single-append transactions over a few keys, through the routers
// (or vtgates) in turn, spread over the fault window.
func (r *failoverRun) appends(n int) func(int) string {
	s, f := r.f.s, r.f
	keys := s.Param("keys", 2+s.Intn(4))
	type gen struct {
		at          int64
		client, via int
		txn         model.Txn
	}
	vias := len(f.routers) + len(r.gates)
	gens := make([]gen, n)
	for i := range n {
		g := gen{at: s.Between(0, s.Options().Net.FaultWindow), client: s.Intn(len(f.clients)), via: s.Intn(vias),
			txn: model.Txn{ID: int64(i + 1), Ops: []model.Op{{Kind: model.OpAppend, Key: "k" + strconv.Itoa(s.Intn(keys)), Value: int64(i + 1)}}}}
		gens[i] = g
		keep := s.KeepOp(i)
		// A dropped operation is still scheduled, as a no-op: the draws stay aligned.
		s.At(g.at, detsim.Label{Kind: "op", What: "txn", ID: g.txn.ID}, func() {
			if !keep {
				return
			}
			if r.vitess {
				r.gateQuery(g.client, r.gates[g.via], g.txn)
			} else {
				f.query(g.client, g.via, g.txn)
			}
		})
	}
	return func(i int) string {
		g := gens[i]
		return fmt.Sprintf("t=%d client-%d via #%d txn %d %v", g.at, g.client, g.via, g.txn.ID, g.txn.Ops)
	}
}

// gateQuery sends a transaction from a client through a vtgate and records it.
func (r *failoverRun) gateQuery(client int, g *model.VTGate, txn model.Txn) {
	s, f := r.f.s, r.f
	op := f.hist.Invoke(&check.Op{ID: txn.ID, Client: s.Net.Name(f.clients[client]), Via: g.ID, Kind: "txn", Txn: txn, Invoke: s.Now()})
	s.Net.Call(f.clients[client], g.Node, "query "+strconv.FormatInt(txn.ID, 10), 0,
		func(rep detsim.Reply) { g.Query(txn, rep) },
		func(v any, err error) {
			var reads [][]int64
			if v != nil {
				reads = v.([][]int64)
			}
			check.Complete(op, s.Now(), reads, err)
			s.Note(detsim.Label{Kind: "done", From: g.ID, To: op.Client, What: op.Outcome.String(), ID: txn.ID})
		})
}

// check runs the end-of-run checkers.
func (r *failoverRun) check() *detsim.Violation {
	s, f := r.f.s, r.f
	final := f.store.Current(dbRef)
	for _, a := range r.old.Accepted {
		if a.Writes && r.standby.PromotedStep > 0 && a.Step > r.standby.PromotedStep {
			s.Probe("failover.old_took_write")
		}
	}
	if v := check.ListAppend(f.hist, f.finalRow(hostsOf(final.Layout))); v != nil {
		return v
	}
	if v := check.Generations(f.store, f.files, f.routers); v != nil {
		return v
	}
	if v := r.d.checkSteps(); v != nil {
		return v
	}
	a := r.cur
	if a == nil || a.done == nil || a.done.Outcome != failover.Repointed {
		return &detsim.Violation{Invariant: "converges", T: s.Now(),
			Detail: fmt.Sprintf("failover attempt %d is not repointed after the faults healed and a quiet period (ended: %v)", r.attempts, doneOf(a))}
	}
	if b := final.Layout.Shards[r.idx].Backend; b.Host != r.promoted.Host || final.Generation <= a.start.Generation {
		return &detsim.Violation{Invariant: "converges", T: s.Now(),
			Detail: fmt.Sprintf("the record (generation %d) names %s for shard %s, not the promoted %s", final.Generation, b.Host, r.shard, r.promoted.Host)}
	}
	if r.vitess {
		if p := r.vt.Primary(r.shard); p != r.promoted.Tablet {
			return &detsim.Violation{Invariant: "converges", T: s.Now(), Detail: fmt.Sprintf("Vitess's primary of %s is %s, not %s", r.shard, p, r.promoted.Tablet)}
		}
		for _, g := range r.gates {
			if g.Routes(r.shard) != r.promoted.Host {
				return &detsim.Violation{Invariant: "converges", T: s.Now(), Detail: fmt.Sprintf("%s routes %s to %s, not %s", g.ID, r.shard, g.Routes(r.shard), r.promoted.Host)}
			}
		}
		return nil
	}
	return check.Converged(f.routers, db, final.Generation, hostsOf(final.Layout), s.Now())
}

func doneOf(a *attempt) any {
	if a == nil || a.done == nil {
		return "not done"
	}
	return *a.done
}
