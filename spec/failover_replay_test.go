package spec

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
	"loam.dev/router/machine/machinetest"
)

// TestModelReplayPrimaryFailover is issue 18's model-based test for the PrimaryFailover
// model: runs its simulator generates are replayed on machine/failover, for both engines.
// The replay plays the world the machine drives the way each model step says: the old
// primary answering the fence (alive: fenced; dead: the call fails) and the retry timer
// that sends it again, Vitess taking the reparent, the store's compare-and-set of the
// record against another writer's changes (another shard's, the same repoint, the shard
// removed), ConfigPush taking the generation, and the routers loading the topology
// (Vitess) or the pushed record (PgDog). After each step the machine must have emitted
// exactly the model's actions, have in flight the command of the model's stage (or its
// retry timer, or Done with the model's outcome), and the world its commands made must be
// the model's: the fence, the reparent, the stored record (version, generation, which
// primary the shard names, whether it is there), the generation and primary pushed, and
// what each router routes to.
//
// SPEC_REPLAY_RUNS (default 30) sets how many runs. The same runs replayed on the machine
// with its SkipFence mutant on must fail.
func TestModelReplayPrimaryFailover(t *testing.T) {
	runs := modelRuns[pfState](t, "PrimaryFailover.qnt", "PrimaryFailoverMC", replayRuns(t, 30), 30)
	steps := 0
	outcomes := map[string]int{}
	for _, r := range runs {
		require.NoError(t, replayFailover(r, failover.Mutants{}))
		steps += len(r.States) - 1
		last := r.States[len(r.States)-1].S
		outcomes[last.Engine+"/"+last.Outcome]++
	}
	t.Logf("%d model runs (%d steps) replayed on machine/failover; outcomes %v", len(runs), steps, outcomes)
	require.Greater(t, outcomes["vitess/ok"], 0, "no replayed Vitess run repointed")
	require.Greater(t, outcomes["pgdog/ok"], 0, "no replayed PgDog run repointed")
	err := firstReplayError(runs, func(r modelRun[pfState]) error { return replayFailover(r, failover.Mutants{SkipFence: true}) })
	var re *replayError
	require.ErrorAs(t, err, &re, "machine/failover with SkipFence replayed every model run: the replay does not check the fence")
	t.Logf("SkipFence: %s", firstLine(err))
}

type pfState struct {
	Action string
	Picks  map[string]any
	S      struct {
		Engine, Stage, Outcome, Primary, PushedPrimary string
		OldAlive, Fenced, FenceOut, Reparented         bool
		ShardThere                                     bool
		Version, Gen, Expect, Pushed                   int
		Route                                          map[string]string
		Emitted                                        []string
	}
}

// pfStart is the failover of shard s0 (PgDog) or -80 (Vitess), record version 1 at
// generation 1 as the model's, its primary promoted to a replica.
func pfStart(engine string) failover.Start {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	if engine == "vitess" {
		be := func(host, tablet string) shardmap.Backend {
			return shardmap.Backend{Host: host, Port: 3306, Database: "vt_customer", Tablet: tablet}
		}
		r, err := shardmap.NewVindex("customer", key, shardmap.VindexHash, be("10.0.4.2", "zone1-0000000200"), be("10.0.4.3", "zone1-0000000300"))
		if err != nil {
			panic(err)
		}
		r.Version = 1
		return failover.Start{Record: r, Shard: r.Layout.Shards[0].Name, Promoted: be("10.0.4.12", "zone1-0000000201"),
			Options: failover.Options{Attempts: 2}}
	}
	be := func(host string) shardmap.Backend { return shardmap.Backend{Host: host, Port: 5432, Database: "app"} }
	r := shardmap.NewPgHash("app", key, be("10.0.1.1"), be("10.0.1.2"))
	r.Version = 1
	return failover.Start{Record: r, Shard: "s0", Promoted: be("10.0.1.11"), Role: "app", Options: failover.Options{Attempts: 2}}
}

// pfPrimary is which primary rec names for shard: "new" (promoted), "old", or "" (gone).
func pfPrimary(rec *shardmap.Record, shard string, promoted shardmap.Backend) string {
	for _, l := range []*shardmap.Layout{&rec.Layout, rec.Target} {
		if l == nil {
			continue
		}
		for _, s := range l.Shards {
			if s.Name == shard {
				if s.Backend.Host == promoted.Host && s.Backend.Port == promoted.Port {
					return "new"
				}
				return "old"
			}
		}
	}
	return ""
}

// replayFailover feeds one model run to a fresh machine (with mu on) and returns the first
// step where the machine does not do what the model did.
func replayFailover(run modelRun[pfState], mu failover.Mutants) (err error) {
	states := run.States
	m := failover.New()
	rp := newReplayer(run.Name, func(i int) string { return states[i].Action })
	tr, rng, fail := rp.tr, rp.rng, rp.fail
	timers := machinetest.Timers{}
	now := int64(1000)
	var start failover.Start
	var store *shardmap.Record
	var before []string // the other writes before Start
	var inflight failover.Command
	var done *failover.Done
	// The world: the fence, Vitess's topology, what ConfigPush got, each router's primary.
	fenced, reparented := false, false
	pushed, pushedPrimary := 0, "old"
	route := map[string]string{"r1": "old", "r2": "old"}
	defer recoverReplay(&err)
	feed := func(in failover.Input) {
		now++
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in) {
			rp.log = append(rp.log, "      cmd "+c.String())
			if timers.Record(c) {
				continue
			}
			switch c := c.(type) {
			case failover.Alert:
			case failover.Done:
				done = &c
			default:
				if inflight != nil {
					fail("the machine sent %s with %s in flight", c, inflight)
				}
				inflight = c
			}
		}
	}
	// take is the command in flight, of the kind the model's step answers.
	take := func(kind string) failover.Command {
		c := inflight
		if typeName(c) != kind {
			fail("the model answers %s, the machine has %s in flight", kind, typeName(c))
		}
		inflight = nil
		return c
	}
	reply := func(c failover.Command, err error) {
		step, at := stepOf(c)
		feed(failover.Reply{Step: step, Attempt: at, Err: err})
	}
	for i := 1; i < len(states); i++ {
		rp.step = i
		p, s := states[i-1].S, states[i].S
		act, picks := states[i].Action, states[i].Picks
		rp.log = append(rp.log, fmt.Sprintf("  %d %s %v -> model %s/%s fenceOut=%v expect=%d emitted=%v", i, act, picks, s.Stage, s.Outcome, s.FenceOut, s.Expect, s.Emitted))
		switch act {
		case "Start":
			start = pfStart(s.Engine)
			start.Options.Mutants = mu
			store = start.Record.Clone()
			for _, kind := range before {
				store = pfOtherWrite(store, start, kind)
			}
			feed(start)
		case "SendFence":
			// The machine sent the fence at Start; after a failed try it sends it again
			// when its retry timer fires.
			if inflight == nil {
				id, _, ok := timers.Pop(1 << 62)
				if !ok {
					fail("the model sends the fence again, the machine has neither a fence in flight nor a retry timer")
				}
				feed(failover.TimerFired{ID: id})
			}
			if typeName(inflight) != "FenceOld" {
				fail("the model sends the fence, the machine has %s in flight", typeName(inflight))
			}
		case "FenceAnswers":
			c := take("FenceOld")
			if p.OldAlive {
				fenced = true
				reply(c, nil)
			} else {
				reply(c, errors.New("fence: connection refused"))
			}
		case "Reparent":
			reparented = true
			reply(take("Reparent"), nil)
		case "Repoint":
			c := take("WriteRecord").(failover.WriteRecord)
			if c.Expect != store.Version {
				feed(failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Conflict: store.Clone(), Err: errors.New("conflict")})
				break
			}
			store = c.Record.Clone()
			store.Version = c.Expect + 1
			feed(failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Version: store.Version})
		case "Push":
			c := take("Push").(failover.Push)
			pushed, pushedPrimary = int(c.Generation), pfPrimary(c.Record, start.Shard, start.Promoted)
			reply(c, nil)
		case "OtherWrite":
			kind, _ := picks["kind"].(string)
			if store == nil { // before Start: the record the machine starts from is the older one
				before = append(before, kind)
				break
			}
			store = pfOtherWrite(store, start, kind)
		case "RouterLoads":
			r, _ := picks["r"].(string)
			switch {
			case s.Engine == "vitess" && reparented:
				route[r] = "new"
			case s.Engine == "vitess" || pushed == 0:
				route[r] = "old"
			default:
				route[r] = pushedPrimary
			}
		case "Write":
		default:
			fail("unknown model action %q", act)
		}
		if acts := tr.Take(); !sameActions(acts, s.Emitted) {
			fail("the machine emitted %v, the model %v", actionsOf(acts), s.Emitted)
		}
		// The command in flight: the model's stage's, or none once done.
		want := map[string]string{"fence": "FenceOld", "reparent": "Reparent", "record": "WriteRecord", "push": "Push"}[s.Stage]
		switch {
		case s.Stage == "done":
			if done == nil {
				fail("the model ended %s, the machine sent no Done", s.Outcome)
			}
			if got := map[failover.Outcome]string{failover.Repointed: "ok", failover.Failed: "failed"}[done.Outcome]; got != s.Outcome {
				fail("the machine ended %s, the model %s", done.Outcome, s.Outcome)
			}
		case done != nil:
			fail("the machine ended %s, the model is at %s", done.Outcome, s.Stage)
		case s.Stage == "fence" && !s.FenceOut:
			if inflight == nil && len(timers) == 0 {
				fail("the model will send the fence again, the machine has neither a fence in flight nor a retry timer")
			}
		case want != "" && typeName(inflight) != want:
			fail("the model's stage %s has %s in flight, the machine %s", s.Stage, want, typeName(inflight))
		}
		if w, ok := inflight.(failover.WriteRecord); ok && int(w.Expect) != s.Expect {
			fail("the machine's record write expects version %d, the model's %d", w.Expect, s.Expect)
		}
		// The world.
		if store != nil {
			prim := pfPrimary(store, start.Shard, start.Promoted)
			if prim == "" {
				prim = p.Primary // the model keeps the gone shard's last primary
			}
			got := fmt.Sprint(int(store.Version), int(store.Generation), prim, pfPrimary(store, start.Shard, start.Promoted) != "")
			if want := fmt.Sprint(s.Version, s.Gen, s.Primary, s.ShardThere); got != want {
				fail("the store holds version, generation, primary, shard there %s, the model %s", got, want)
			}
		}
		if fenced != s.Fenced || reparented != s.Reparented || pushed != s.Pushed || pushedPrimary != s.PushedPrimary || !maps.Equal(route, s.Route) {
			fail("the world has fenced=%v reparented=%v pushed=%d/%s routes %v, the model fenced=%v reparented=%v pushed=%d/%s routes %v",
				fenced, reparented, pushed, pushedPrimary, route, s.Fenced, s.Reparented, s.Pushed, s.PushedPrimary, s.Route)
		}
	}
	return nil
}

// pfOtherWrite is rec after another writer's change of kind (the model's OtherWrite):
// another shard's ("other"), the same repoint ("same"), or the shard removed ("gone").
func pfOtherWrite(rec *shardmap.Record, start failover.Start, kind string) *shardmap.Record {
	rec = rec.Clone()
	rec.Version++
	rec.Generation++
	for j, sh := range rec.Layout.Shards {
		if sh.Name != start.Shard {
			continue
		}
		switch kind {
		case "same":
			rec.Layout.Shards[j].Backend = start.Promoted
		case "gone":
			rec.Layout.Shards[j].Name = "gone"
		}
	}
	return rec
}
