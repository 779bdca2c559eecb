package scenario

import (
	"fmt"
	"hash"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// TinyMaxGen bounds the generations of the fencing scenario's exhaustive configuration, as
// MaxGen bounds them in the seed's TLA+ model, so the state space is finite.
const TinyMaxGen = 4

// fencingTiny is the seed's TLA+ model of the migration (one session, pods p1..p3, MaxGen
// 4) in the simulator's exhaustive mode. Time is abstract, as there: a lease lives until an
// expire step removes it, and a step is one action of the model, chosen by the explorer
// among those enabled:
//
//   - a pod acquires (its version's script on model.Valkey; disabled when the script
//     refuses or would grant a generation above MaxGen);
//   - the old or the new lease expires;
//   - a pod below the allowed version is upgraded by one (and reports it to the machine);
//   - the operator allows the next version: when the machine waits to prove the drain,
//     its timer fires and the scan reads the keys within the step, then Advance; enabled
//     when the machine allows it;
//   - the operator asks for the backfill, which runs within the step; enabled when the
//     machine runs it;
//   - the operator asks for the door and confirms; enabled when the machine enables it.
//
// The gates are the real rollout machine's (machine/fencemigrate), not a restatement. The
// state hashed is the TLA+ model's: the keys, each pod's version, the allowed version, the
// backfill and enable flags, and the last generation granted.
func fencingTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	const forever = 1 << 40
	m := fencingMutant(mutant)
	sess := fencing.Session{Community: "acme", ID: "s1"}
	k := fencing.Buzz.Keys(sess)
	v := model.NewValkey(s, "valkey", fencing.Buzz, []fencing.Session{sess})
	v.Scripts = m
	var violation *detsim.Violation
	v.OnScript = func() {
		if violation == nil {
			violation = check.SingleAuthority(v, s.Now())
		}
	}
	mach := fencemigrate.New(fencemigrate.Config{LeaseTTL: 1, Mutant: m})
	var pods [3]fencing.Version
	names := [3]string{"p1", "p2", "p3"}
	var lastIssued uint64
	ctx := s.Ctx(0)
	trial := &machine.Ctx{Trace: machine.Discard}
	clone := func() *fencemigrate.Machine {
		c, err := fencemigrate.Restore(mach.Snapshot())
		if err != nil {
			panic(fmt.Sprintf("scenario: fencemigrate snapshot does not restore: %v", err))
		}
		return c
	}

	type action struct {
		name string
		do   func()
	}
	enabled := func() []action {
		var out []action
		for i, ver := range pods {
			c := fencing.Call{Version: ver, Op: fencing.Acquire, Owner: names[i], TTL: forever}
			r, err := fencing.Apply(v.Keys().Clone(), k, s.Now(), c, m)
			if err != nil {
				panic(fmt.Sprintf("scenario: fencing tiny: %v", err))
			}
			if !r.OK || r.Lease.Gen > TinyMaxGen {
				continue
			}
			out = append(out, action{names[i] + " acquires", func() {
				r, err := v.Script(names[i], sess, c)
				if err != nil || !r.OK {
					panic(fmt.Sprintf("scenario: fencing tiny: an enabled acquire did not grant: %v %v", r, err))
				}
				lastIssued = max(lastIssued, r.Lease.Gen)
				if violation == nil {
					violation = check.FencingT2(v.History, s.Now())
				}
			}})
		}
		for _, sp := range []fencing.Keyspace{fencing.Old, fencing.New} {
			if _, ok := v.Keys()[k.Lease(sp)]; ok {
				out = append(out, action{"expire " + sp.String(), func() { v.ExpireLease(sess, sp) }})
			}
		}
		for i := range pods {
			if pods[i] < mach.Allowed() {
				out = append(out, action{names[i] + " upgrades", func() {
					pods[i]++
					mach.On(ctx, fencemigrate.PodReported{Pod: names[i], Version: pods[i]})
				}})
			}
		}
		if tinyAllow(clone(), trial, v.LiveOldLeases()) {
			out = append(out, action{"allow", func() { tinyAllow(mach, ctx, v.LiveOldLeases()) }})
		}
		if tinyBackfill(clone(), trial, func() {}) {
			out = append(out, action{"backfill", func() {
				tinyBackfill(mach, ctx, func() {
					if _, err := v.Backfill(); err != nil {
						panic(fmt.Sprintf("scenario: fencing tiny: backfill: %v", err))
					}
				})
			}})
		}
		if tinyEnable(clone(), trial, func() {}) {
			out = append(out, action{"enable", func() {
				tinyEnable(mach, ctx, func() {
					if violation == nil {
						violation = check.OneWayDoor(v, s.Now())
					}
					v.EnableCluster()
				})
			}})
		}
		return out
	}
	s.SetStateHasher(func(h hash.Hash) {
		keys := v.Keys()
		for _, key := range keys.Keys() {
			fmt.Fprintf(h, "%s=%s;", key, keys[key].Value)
		}
		snap := mach.Snapshot()
		fmt.Fprintf(h, "%v|%v|%v|%v|%d", pods, snap.Allowed, snap.Backfilled, snap.Enabled, lastIssued)
	})
	var step func()
	var acts []action // enabled in the current state
	next := func() {
		// A step is scheduled only while one is enabled, so a terminal state has nothing
		// pending and hashes as itself.
		if violation != nil {
			return
		}
		if acts = enabled(); len(acts) > 0 {
			s.After(0, detsim.Label{Kind: "step"}, step)
		}
	}
	step = func() {
		a := acts[s.Intn(len(acts))]
		s.Note(detsim.Label{Kind: "action", What: a.name})
		a.do()
		next()
	}
	s.At(0, detsim.Label{Kind: "init"}, func() {
		for _, p := range names {
			mach.On(ctx, fencemigrate.PodReported{Pod: p, Version: fencing.O})
		}
		next()
	})
	s.Run(1, 10_000)
	if violation != nil {
		return violation
	}
	return detsim.Pruned(s)
}

// tinyAllow is the operator allowing the next version on mm, with the drain proven within
// the step when the machine waits for it (live is what the scan finds). It reports whether
// the machine allowed it.
func tinyAllow(mm *fencemigrate.Machine, ctx *machine.Ctx, live int) bool {
	snap := mm.Snapshot()
	if snap.DrainTimer != "" {
		for _, c := range mm.On(ctx, fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: snap.DrainTimer}}) {
			if sc, ok := c.(fencemigrate.ScanOldLeases); ok {
				mm.On(ctx, fencemigrate.OldLeasesScanned{Step: sc.Step, Live: live})
			}
		}
	}
	for _, c := range mm.On(ctx, fencemigrate.Advance{To: snap.Allowed + 1}) {
		if _, ok := c.(fencemigrate.AllowVersion); ok {
			return true
		}
	}
	return false
}

// tinyBackfill is the operator asking mm for the backfill; run executes it. It reports
// whether the machine ran it.
func tinyBackfill(mm *fencemigrate.Machine, ctx *machine.Ctx, run func()) bool {
	for _, c := range mm.On(ctx, fencemigrate.StartBackfill{}) {
		if rb, ok := c.(fencemigrate.RunBackfill); ok {
			run()
			mm.On(ctx, fencemigrate.BackfillDone{Step: rb.Step})
			return true
		}
	}
	return false
}

// tinyEnable is the operator asking mm for the door and confirming; run opens it. It
// reports whether the machine opened it.
func tinyEnable(mm *fencemigrate.Machine, ctx *machine.Ctx, run func()) bool {
	for _, c := range mm.On(ctx, fencemigrate.RequestEnable{}) {
		ask, ok := c.(fencemigrate.AskConfirmation)
		if !ok {
			continue
		}
		for _, c := range mm.On(ctx, fencemigrate.Confirm{Token: ask.Token}) {
			if ec, ok := c.(fencemigrate.EnableCluster); ok {
				run()
				mm.On(ctx, fencemigrate.ClusterEnabled{Step: ec.Step})
				return true
			}
		}
	}
	return false
}
