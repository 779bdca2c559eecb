package scenario

import (
	"fmt"
	"hash"
	"time"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
)

// Push is the ConfigPush machine on the daemon moving router instances through a series of
// generations an operator publishes (bumps, a reshard that renders the destination, its
// publication), while instances crash and restart from the files, reloads fail after
// parsing, files writes fail, the controller restarts and its clock jumps, and a stray
// controller asks for files of a generation the record does not publish yet. It checks
// that generations only increase, files are written only for published generations, and
// every instance converges on the record once faults heal; and, on every command the daemon
// executes, the step invariants the machine's world test checks (check.Steps: one files
// write awaited at a time, no RELOAD before its files landed, every push ends).
var Push = detsim.Scenario{
	Name: "push",
	Points: []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset",
		"pgdog.crash", "pgdog.reload.after_parse", "files.write.fail", "store.cas.conflict",
		"ctl.restart", "clock.jump"},
	Probes: []string{"fault:pgdog.reload.after_parse", "fault:files.write.fail", "fault:store.cas.conflict",
		"fault:ctl.restart", "fault:clock.jump", "ShardMap.Supersede", "ShardMap.Retry", "ShardMap.GiveUp",
		"ShardMap.Restart", "ShardMap.Refuse", "push.superseded", "push.unknown", "operator.retry"},
	Mutants: []string{MutantPushUnpublished, MutantRegressUnchecked, MutantNoReconcile, MutantNoStrayWait,
		MutantReloadEarly, MutantSilentGiveUp},
	World:       pushWorld,
	Tiny:        pushTiny,
	TinyPoints:  []string{"pgdog.crash", "pgdog.reload.after_parse"},
	TinyMutants: []string{MutantPushUnpublished, MutantRegressUnchecked},
}

const (
	// MutantPushUnpublished is configpush.MutantWriteUnpublished: ConfigPush writes the
	// files of g+1 before the record publishes it.
	MutantPushUnpublished = "configpush-write-unpublished"
	// MutantRegressUnchecked is configpush.MutantRegress (a Push older than what was
	// written is accepted) over a files target that does not compare the generation
	// annotation: both defences of "generations only increase" off. Either one alone holds
	// the invariant, which the correct runs of this scenario show with stale pushes in the
	// workload.
	MutantRegressUnchecked = "regress-unchecked"
	// MutantNoReconcile is a daemon that pushes only what its watch returns: it never reads
	// the record again nor re-pushes, so a lost watch answer or an instance that was stuck
	// is never caught up. It trips "converges".
	MutantNoReconcile = "daemon-no-reconcile"
	// MutantNoStrayWait is configpush.MutantNoStrayWait: a superseded push's files write
	// is not waited for. It trips "push-one-write".
	MutantNoStrayWait = "configpush-no-stray-wait"
	// MutantReloadEarly is configpush.MutantReloadEarly: the instances are reloaded while
	// the files write is still in flight. It trips "push-reload-after-files".
	MutantReloadEarly = "configpush-reload-early"
	// MutantSilentGiveUp is configpush.MutantSilentGiveUp: a files write out of attempts
	// ends nothing. It trips "push-ends".
	MutantSilentGiveUp = "configpush-silent-give-up"
	// MutantSeenAny is configpush.MutantSeenAny: an answer showing the old files counts
	// as seen. It trips "push-reload-after-seen" in push-kubernetes.
	MutantSeenAny = "configpush-seen-any"
	// MutantConfirmOnReload is configpush.MutantConfirmOnReload: an instance is confirmed
	// on its RELOAD's answer. It trips "push-confirmed-loaded" in push-kubernetes's runs
	// without AwaitFiles.
	MutantConfirmOnReload = "configpush-confirm-on-reload"
)

func pushWorld(s *detsim.Sim, mutant string) *detsim.Violation { return pushWorldOn(s, mutant, false) }

// PushKubernetes is Push on Kubernetes: the files reach each pod only after the kubelet's
// projection delay (model.Files.ProjectionDelay, up to 3 s here), a router that starts or
// reloads earlier reads the older files, and ConfigPush runs with AwaitFiles (three runs in
// four; the fourth relies on the retry of a RELOAD that re-read old files). The same
// checks hold: generations only increase, files only for published generations, and every
// instance converges, with the daemon's shared step checks, check.ReloadSeen among them.
var PushKubernetes = detsim.Scenario{
	Name:    "push-kubernetes",
	Points:  Push.Points,
	Mutants: []string{MutantSeenAny, MutantConfirmOnReload},
	World:   func(s *detsim.Sim, mutant string) *detsim.Violation { return pushWorldOn(s, mutant, true) },
}

func pushWorldOn(s *detsim.Sim, mutant string, kube bool) *detsim.Violation {
	f := newFleet(s)
	shards := s.Param("shards", 1+s.Intn(2))
	rec := pgHash(1, f.backends(0, shards, false))
	spare := f.backends(shards, 2*shards, false) // reshard destinations
	f.start(rec, false, s.Param("instances", 2+s.Intn(3)), 0)
	f.files.NoGenerationCheck = mutant == MutantRegressUnchecked
	known := s.Param("generation_known", s.Intn(2)) == 1
	for _, r := range f.routers {
		r.GenerationKnown = known
	}
	f.crashes()
	// The machine's own options are part of the swarm too: short step timeouts make late
	// answers (and late writes) common, few attempts make stuck instances common.
	opts := configpush.Options{
		StepTimeout: time.Duration(s.Param("step_timeout_ms", []int{500, 2000, 10_000}[s.Intn(3)])) * time.Millisecond,
		Backoff:     time.Duration(s.Param("backoff_ms", []int{100, 500}[s.Intn(2)])) * time.Millisecond,
		MaxAttempts: s.Param("max_attempts", 2+s.Intn(4)),
	}
	opts.Mutant = pushMutant(mutant)
	if kube {
		f.files.ProjectionDelay = int64(s.Param("kubelet_delay_ms", 3000))
		// Where the routers report what they route by, one run in four leaves AwaitFiles
		// off: the retry of a RELOAD that re-read the old files (and the daemon's
		// reconcile) must converge alone, and the Observe after each RELOAD is then all
		// that keeps an instance that re-read them unconfirmed. Routers that cannot say
		// (PgDog's) need AwaitFiles, which the controller sets on Kubernetes.
		opts.AwaitFiles = !known || s.Param("await_files", min(s.Intn(4), 1)) == 1
	}
	d := newDaemon(f, opts, false)
	d.noReconcile = mutant == MutantNoReconcile
	d.start()
	n := s.Param("ops", 3+s.Intn(8))
	s.SetWorkload(n, pushOps(s, f, d, n, spare))
	if v := f.runToEnd(60_000, 300_000); v != nil {
		return v
	}
	if v := check.Generations(f.store, f.files, f.routers); v != nil {
		return v
	}
	if v := d.checkSteps(); v != nil {
		return v
	}
	if v := d.steps.Ended(d.ctl.Now()); v != nil {
		return v
	}
	final := f.store.Current(dbRef)
	return check.Converged(f.routers, db, final.Generation, hostsOf(final.Layout), s.Now())
}

// pushOps generates n operator actions over the fault window: bump the generation, start a
// reshard towards the spare backends (its destination is rendered at the current
// generation), publish it, or a stray push of the generation a reshard will publish. The
// last action publishes any reshard in progress, so the run ends serving.
func pushOps(s *detsim.Sim, f *fleet, d *daemon, n int, spare []shardmap.Backend) func(int) string {
	window := s.Options().Net.FaultWindow
	kinds := make([]string, n)
	ats := make([]int64, n)
	for i := range n {
		ats[i] = s.Between(0, window)
		if i == n-1 {
			ats[i] = window - 1
		}
	}
	strays := make([]int64, n)
	for i := range n {
		kind := []string{"bump", "reshard", "publish"}[s.Intn(3)]
		if i == n-1 {
			kind = "publish"
		}
		kinds[i] = kind
		if s.Intn(2) == 0 {
			// A second, confused controller will push soon after: after a reshard, the
			// files of State.To (not published); otherwise the record as it was before.
			strays[i] = s.Between(100, 3000)
		}
		if !s.KeepOp(i) {
			continue
		}
		var before *shardmap.Record
		s.At(ats[i], detsim.Label{Kind: "op", What: kind, ID: int64(i + 1)}, func() {
			before = f.store.Current(dbRef).Clone()
			switch kind {
			case "bump":
				f.operator(func(cur *shardmap.Record) *shardmap.Record {
					if cur.State.Phase != shardmap.Serving {
						return nil
					}
					next := cur.Clone()
					next.Generation++
					return next
				}, "bump")
			case "reshard":
				f.operator(func(cur *shardmap.Record) *shardmap.Record {
					if cur.State.Phase != shardmap.Serving {
						return nil
					}
					return reshardRecord(cur, spare)
				}, "reshard")
			case "publish":
				f.operator(publishRecord, "publish")
			}
		})
		if strays[i] != 0 {
			s.At(ats[i]+strays[i], detsim.Label{Kind: "op", What: "stray", ID: int64(i + 1)}, func() {
				cur := f.store.Current(dbRef)
				if cur.State.Phase == shardmap.Resharding {
					s.Probe("push.stray.unpublished")
					unpublished := publishRecord(cur)
					d.push.Feed(configpush.Push{Record: cur.Clone(), Generation: cur.State.To,
						Files: model.Render(unpublished, false), Instances: f.routerIDs()})
					return
				}
				if before != nil && before.Generation < cur.Generation {
					s.Probe("push.stray.stale")
					d.push.Feed(configpush.Push{Record: before, Generation: before.Generation,
						Files: model.Render(before, false), Instances: f.routerIDs()})
				}
			})
		}
	}
	return func(i int) string {
		if strays[i] != 0 {
			return fmt.Sprintf("t=%d operator %s, then a stray push (its target, or the record before it) at t=%d", ats[i], kinds[i], ats[i]+strays[i])
		}
		return fmt.Sprintf("t=%d operator %s", ats[i], kinds[i])
	}
}

// reshardRecord moves a serving record to resharding towards the spare backends. Rendering
// the destination changes routing, so it takes a generation of its own, g; the target is
// published as g+1.
func reshardRecord(cur *shardmap.Record, spare []shardmap.Backend) *shardmap.Record {
	next := cur.Clone()
	src := hostsOf(cur.Layout)
	var pool []shardmap.Backend
	for _, b := range spare {
		if !containsHost(src, b.Host) {
			pool = append(pool, b)
		}
	}
	if len(pool) == 0 { // the spares serve now: go back to the first layout's hosts
		return nil
	}
	tgt := shardmap.Layout{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: uint32(len(pool))}}
	for i, b := range pool {
		tgt.Shards = append(tgt.Shards, shardmap.Shard{Name: fmt.Sprintf("t%d", i), Backend: b, Fence: shardmap.FenceOpen})
	}
	next.Target = &tgt
	next.Generation = cur.Generation + 1
	next.State = shardmap.State{Phase: shardmap.Resharding, To: next.Generation + 1}
	return next
}

// publishRecord publishes a reshard's target as the next generation (nil if none runs).
func publishRecord(cur *shardmap.Record) *shardmap.Record {
	if cur.State.Phase != shardmap.Resharding || cur.Target == nil {
		return nil
	}
	next := cur.Clone()
	next.Layout = *cur.Target
	next.Target = nil
	next.Generation = cur.State.To
	next.State = shardmap.State{Phase: shardmap.Serving}
	return next
}

func containsHost(hosts []string, h string) bool {
	for _, x := range hosts {
		if x == h {
			return true
		}
	}
	return false
}

// pushTiny is the exhaustive configuration: two instances, one shard, an operator who
// starts a reshard and publishes it, a stray push of the unpublished target in between and
// a stale push of the record before the publication, with instance crashes and failed
// reloads as the faults.
func pushTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 1, false))
	spare := f.backends(1, 1, false)
	f.start(rec, false, 2, 0)
	f.files.NoGenerationCheck = mutant == MutantRegressUnchecked
	f.crashes()
	opts := configpush.Options{StepTimeout: 100 * time.Millisecond, Backoff: 20 * time.Millisecond, MaxAttempts: 2}
	opts.Mutant = pushMutant(mutant)
	d := newDaemon(f, opts, false)
	d.start()
	f.hashState()
	outer := s.StateHasher()
	s.SetStateHasher(func(h hash.Hash) {
		outer(h)
		detsim.RelativeJSON(h, d.push.Machine().(*configpush.Machine).Snapshot(), d.ctl.Now())
		g, _ := f.files.Read()
		cur := f.store.Current(dbRef)
		var latest uint64
		if d.latest != nil {
			latest = d.latest.Version
		}
		fmt.Fprintf(h, "files=%d rec=%d/%d/%d latest=%d", g, cur.Version, cur.Generation, cur.State.Phase, latest)
	})
	// Each action waits for the push the previous one caused to end: pushes that overlap
	// multiply the orders to explore, and a pending event at an absolute time would keep
	// equal states apart. The sequence: generation 1 pushed → the operator starts a reshard
	// (generation 2) → pushed → a stray controller asks for State.To (refused, or written by
	// the mutant) → the operator publishes generation 3 → pushed → a stale controller
	// pushes the record of generation 2 again (refused, or regressing under the mutant).
	var before *shardmap.Record
	strayDone, staleDone := false, false
	d.onOutcome = func(o configpush.Outcome) {
		cur := f.store.Current(dbRef)
		switch {
		case o.Generation == 1 && o.Refused == "" && cur.Generation == 1:
			f.operator(func(cur *shardmap.Record) *shardmap.Record { return reshardRecord(cur, spare) }, "reshard")
		case o.Generation == 2 && o.Refused == "" && !strayDone && cur.State.Phase == shardmap.Resharding:
			strayDone = true
			d.push.Feed(configpush.Push{Record: cur.Clone(), Generation: cur.State.To,
				Files: model.Render(publishRecord(cur), false), Instances: f.routerIDs()})
		case o.Generation == 3 && strayDone && cur.State.Phase == shardmap.Resharding:
			before = cur.Clone()
			f.operator(publishRecord, "publish")
		case o.Generation == 3 && o.Refused == "" && !staleDone && before != nil && cur.Generation == 3:
			staleDone = true
			d.push.Feed(configpush.Push{Record: before, Generation: before.Generation,
				Files: model.Render(before, false), Instances: f.routerIDs()})
		}
	}
	s.StartNemesis()
	s.Run(300, 100_000)
	if v := check.Generations(f.store, f.files, f.routers); v != nil {
		return v
	}
	if v := d.checkSteps(); v != nil {
		return v
	}
	return detsim.Pruned(s)
}

// pushMutant is the configpush mutant a scenario mutant switches on.
func pushMutant(mutant string) configpush.Mutant {
	switch mutant {
	case MutantPushUnpublished:
		return configpush.MutantWriteUnpublished
	case MutantRegressUnchecked:
		return configpush.MutantRegress
	case MutantNoStrayWait:
		return configpush.MutantNoStrayWait
	case MutantReloadEarly:
		return configpush.MutantReloadEarly
	case MutantSilentGiveUp:
		return configpush.MutantSilentGiveUp
	case MutantSeenAny:
		return configpush.MutantSeenAny
	case MutantConfirmOnReload:
		return configpush.MutantConfirmOnReload
	}
	return configpush.MutantNone
}
