package spec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// TestModelReplayVitessReshard is issue 18's model-based test, the other direction of trace
// validation: runs the VitessReshard model's simulator generates (quint run --mbt
// --out-itf) are replayed on machine/vreshard. Each model step becomes the machine's input
// (the answer Vitess or the store gives to the command in flight, a failure, a crash and
// restore through machinetest.RoundTrip, a timer, the operator's cancel, another writer of
// the record), and after it the machine must have emitted exactly the actions the model's
// step emitted, have in flight the command the model's next state names (or a timer, or
// Done with the model's outcome), and the store the harness keeps must hold the record the
// model's store holds (side of Layout and Target, phase, generation and version counted
// from the start). So the machine can do what the model allows at these bounds.
// SPEC_REPLAY_RUNS (default 40) sets how many runs (SPEC_REPLAY_ITF=<dir> replays saved ones). The same runs replayed on the machine with
// its SkipMirror mutant on must fail (the replay checks the mirror).
func TestModelReplayVitessReshard(t *testing.T) {
	runs := modelRuns[mState](t, "VitessReshard.qnt", "VitessReshardMC", replayRuns(t, 40), 50)
	outcomes := map[string]int{}
	steps := 0
	for _, r := range runs {
		require.NoError(t, replayVReshard(t, r, vreshard.Mutants{}))
		steps += len(r.States) - 1
		outcomes[r.States[len(r.States)-1].M.Outcome]++
	}
	t.Logf("%d model runs (%d steps) replayed on machine/vreshard; outcomes %v", len(runs), steps, outcomes)
	require.Greater(t, outcomes["completed"], 0, "no replayed run completed: the replay shows nothing past the mirror")
	// The replay has teeth: the machine's SkipMirror mutant disagrees with the model on
	// some run of the same set.
	err := firstReplayError(runs, func(r modelRun[mState]) error { return replayVReshard(t, r, vreshard.Mutants{SkipMirror: true}) })
	require.Error(t, err, "machine/vreshard with SkipMirror replayed every model run: the replay does not check the mirror")
	t.Logf("SkipMirror: %s", firstLine(err))
}

// The model's state, as much of it as the replay reads.
type mRec struct {
	Version, Gen                  int
	Layout, Target, Phase, Router string
}

type mState struct {
	Action string
	Picks  map[string]any
	M      struct {
		Stage, Outcome string
		Sent, Timer    bool
		Emitted        []string
		Next           mRec
	}
	Store mRec
	VT    struct{ Writes string }
	Dice  struct{ BadPreflight, Dirty, StreamFails, VerifyFails bool }
}

// vreshardStart is keyspace customer unsharded (shard "0") at generation 3, split in two;
// the model's "src" is shard 0, "tgt" the shards -80 and 80-.
func vreshardStart(t *testing.T) vreshard.Start {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r, err := shardmap.NewVindex("customer", key, shardmap.VindexHash, shardmap.Backend{Host: "10.0.4.1", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000100"})
	require.NoError(t, err)
	r.Shards[0].Name = "0"
	v := r.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	r.Layout.Scheme = v
	r.Version, r.Generation = 20, 3
	return vreshard.Start{Record: r, Workflow: "wf", Cell: "zone1", Source: []string{"0"}, Target: []string{"-80", "80-"},
		Backends: map[string]shardmap.Backend{
			"-80": {Host: "10.0.4.2", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000200"},
			"80-": {Host: "10.0.4.3", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000201"},
		},
		Options: vreshard.Options{PollEvery: 1000, RetryAfter: 100, Attempts: 2}}
}

func sideShards(side string) []string {
	if side == "src" {
		return []string{"0"}
	}
	return []string{"-80", "80-"}
}

func shardNames(l shardmap.Layout) []string {
	var out []string
	for _, s := range l.Shards {
		out = append(out, s.Name)
	}
	return out
}

// replayVReshard feeds one model run to a fresh machine (with mu on) and returns the first
// step where the machine does not do what the model did.
func replayVReshard(t *testing.T, run modelRun[mState], mu vreshard.Mutants) (err error) {
	t.Helper()
	states := run.States
	start := vreshardStart(t)
	start.Options.Mutants = mu
	m := vreshard.New()
	rec := &machine.Recorder{}
	rng := rand.New(rand.NewPCG(1, 2))
	store := start.Record.Clone() // the store the machine's record writes go to
	var inflight vreshard.Command
	timers := machinetest.Timers{}
	now := int64(1000)
	var log []string
	// fail stops the replay with the disagreement at step i (recovered below).
	fail := func(i int, format string, a ...any) {
		panic(&replayError{Run: run.Name, Step: i, Action: states[i].Action, Msg: fmt.Sprintf(format, a...), Log: log})
	}
	defer recoverReplay(&err)
	// cas is the store's compare-and-set of a WriteRecord.
	cas := func(w vreshard.WriteRecord) vreshard.RecordWritten {
		if store.Version != w.Expect {
			return vreshard.RecordWritten{Step: w.Step, Attempt: w.Attempt, Conflict: store.Clone()}
		}
		store = w.Record.Clone()
		store.Version = w.Expect + 1
		return vreshard.RecordWritten{Step: w.Step, Attempt: w.Attempt, Version: store.Version}
	}
	errFor := func(c vreshard.Command, err error) vreshard.Input {
		step, at := stepOf(c)
		switch c.(type) {
		case vreshard.Inspect:
			return vreshard.Inspected{Step: step, Attempt: at, Err: err}
		case vreshard.ReadServing:
			return vreshard.Serving{Step: step, Attempt: at, Err: err}
		case vreshard.WriteRecord:
			return vreshard.RecordWritten{Step: step, Attempt: at, Err: err}
		case vreshard.Status:
			return vreshard.Progress{Step: step, Attempt: at, Err: err}
		case vreshard.VDiff:
			return vreshard.Diffed{Step: step, Attempt: at, Err: err}
		}
		return vreshard.Reply{Step: step, Attempt: at, Err: err}
	}
	for i := 1; i < len(states); i++ {
		p, s := states[i-1], states[i]
		pick := func(name string) bool { b, _ := s.Picks[name].(bool); return b }
		var in vreshard.Input
		switch s.Action {
		case "Start":
			in = start
		case "Answer":
			step, at := stepOf(inflight)
			switch c := inflight.(type) {
			case vreshard.Inspect:
				f := vreshard.Facts{
					Shards: []vreshard.ShardFacts{{Name: "0", Serving: true, Primary: "zone1-0000000100"},
						{Name: "-80", Primary: "zone1-0000000200"}, {Name: "80-", Primary: "zone1-0000000201"}},
					Sources: []vreshard.BinlogFacts{{Shard: "0", Format: "ROW", Image: "FULL", GTID: true}},
					Sharded: !p.Dice.BadPreflight,
					Tables:  []vreshard.TableFacts{{Name: "customer", PrimaryVindex: "hash"}},
				}
				in = vreshard.Inspected{Step: step, Attempt: at, Facts: f}
			case vreshard.ReadServing:
				var prim []vreshard.SrvShard
				for _, n := range sideShards(p.VT.Writes) {
					prim = append(prim, vreshard.SrvShard{Name: n, Range: keyrange.MustParse(n)})
				}
				in = vreshard.Serving{Step: step, Attempt: at, Primary: prim, Replica: prim}
			case vreshard.WriteRecord:
				in = cas(c)
			case vreshard.Status:
				pr := vreshard.Progress{Step: step, Attempt: at, Copying: pick("notYet"), LagMs: 10, Rows: 100}
				if pick("lagging") {
					pr.LagMs = 60_000
				}
				if p.Dice.StreamFails && pick("notYet") {
					pr.Failed = "vstream: table customer: duplicate key"
				}
				in = pr
			case vreshard.VDiff:
				d := vreshard.Diffed{Step: step, Attempt: at, Done: !pick("notYet"), Rows: 100}
				if d.Done && p.Dice.Dirty {
					d.Mismatch = []string{"customer"}
				}
				in = d
			case vreshard.Verify:
				r := vreshard.Reply{Step: step, Attempt: at}
				if p.Dice.VerifyFails {
					r.Err, r.Permanent = errors.New("vtgate: 3 rows of customer missing on -80"), true
				}
				in = r
			case nil:
				fail(i, "the model answers a command but the machine has none in flight")
			default:
				in = vreshard.Reply{Step: step, Attempt: at}
			}
		case "FailCommand":
			if w, ok := inflight.(vreshard.WriteRecord); ok && pick("took") {
				cas(w) // a timeout hid a compare-and-set that took
			}
			in = errFor(inflight, errors.New("vtctld: deadline exceeded"))
		case "Crash":
			if w, ok := inflight.(vreshard.WriteRecord); ok && p.M.Sent && pick("took") {
				cas(w)
			}
			m = machinetest.RoundTrip(t, m, vreshard.Restore)
			timers = machinetest.Timers{}
			inflight = nil
			in = vreshard.Restarted{}
		case "TimerFires":
			id, _, ok := timers.Pop(1 << 62)
			if !ok {
				fail(i, "the model fires a timer but the machine set none")
			}
			in = vreshard.TimerFired{ID: id}
		case "CancelRequest":
			in = vreshard.CancelRequest{}
		case "Finalize":
			in = vreshard.Finalize{}
		case "OtherWrite":
			store = store.Clone()
			store.Version++
			switch die, _ := s.Picks["die"].(int); { // the model's kind: 0-1 same, 2-3 failover, 4 router
			case die >= 2 && die <= 3:
				store.Generation++
				if store.State.Phase == shardmap.Resharding {
					store.State.To = store.Generation + 1
				}
			case die == 4:
				store.Router.Name = "elsewhere"
			}
		default:
			fail(i, "unknown model action %q", s.Action)
		}
		log = append(log, fmt.Sprintf("  %d %s %v -> model %s sent=%v timer=%v emitted=%v", i, s.Action, s.Picks, s.M.Stage, s.M.Sent, s.M.Timer, s.M.Emitted))
		var cmds []vreshard.Command
		if in != nil {
			now += 1000
			cmds = m.On(&machine.Ctx{Now: now, Rand: rng, Trace: rec}, in)
		}
		var acts []string
		for _, e := range rec.Take() {
			acts = append(acts, e.Action)
		}
		if !slices.Equal(acts, s.M.Emitted) && !(len(acts) == 0 && len(s.M.Emitted) == 0) {
			fail(i, "the machine emitted %v, the model %v", acts, s.M.Emitted)
		}
		var done *vreshard.Done
		sent := 0
		for _, c := range cmds {
			log = append(log, "      cmd "+c.String())
			if timers.Record(c) {
				continue
			}
			switch c := c.(type) {
			case vreshard.Alert:
			case vreshard.Done:
				done = &c
			default:
				inflight = c
				sent++
			}
		}
		switch {
		case s.M.Stage == "done" && p.M.Stage != "done":
			if done == nil {
				fail(i, "the model ended %s but the machine sent no Done", s.M.Outcome)
			}
			if done.Outcome.String() != s.M.Outcome {
				fail(i, "the machine ended %s, the model %s", done.Outcome, s.M.Outcome)
			}
			inflight = nil
		case sends(p, s):
			if sent != 1 {
				fail(i, "the model has a %s command in flight, the machine sent %d commands", s.M.Stage, sent)
			}
			if !commandFits(inflight, s) {
				fail(i, "the model has a %s command in flight (%+v), the machine sent %s", s.M.Stage, s.M.Next, inflight)
			}
		case !s.M.Sent && sent > 0:
			fail(i, "the machine sent %s, the model has nothing in flight", inflight)
		}
		if !s.M.Sent && s.M.Stage != "done" {
			inflight = nil
		}
		if s.M.Timer && !s.M.Sent && len(timers) != 1 {
			fail(i, "the model waits on a timer, the machine has %d set", len(timers))
		}
		// The store the machine wrote holds what the model's store holds.
		want := s.Store
		got := mRec{Version: int(store.Version) - 19, Gen: int(store.Generation) - 2, Phase: "serving", Target: "none", Router: "vitess"}
		got.Layout = sideOf(shardNames(store.Layout))
		if store.Target != nil {
			got.Target = sideOf(shardNames(*store.Target))
		}
		if store.State.Phase == shardmap.Resharding {
			got.Phase = "resharding"
		}
		if store.Router.Name != "customer" {
			got.Router = "elsewhere"
		}
		if got != want {
			fail(i, "the store holds %+v, the model's %+v", got, want)
		}
	}
	return nil
}

// sends reports whether the model's step from p to s sends a command: the next step's, an
// answer's follow-up, a timer's resend, a restart's resend, a cancel that turns back at once.
func sends(p, s mState) bool {
	switch s.Action {
	case "Start", "Answer", "TimerFires", "Crash", "Finalize":
		return s.M.Sent
	case "CancelRequest":
		return s.M.Sent && !p.M.Sent
	}
	return false
}

func sideOf(names []string) string {
	if slices.Equal(names, []string{"0"}) {
		return "src"
	}
	if slices.Equal(names, []string{"-80", "80-"}) {
		return "tgt"
	}
	return strings.Join(names, ",")
}

// commandFits reports whether the machine's command in flight is the one the model's state
// names: its kind by stage, a switch's types and direction, a record write's layout side,
// target side and phase.
func commandFits(c vreshard.Command, s mState) bool {
	// The stages whose command is told by its kind alone.
	if kind, ok := map[string]string{"inspect": "Inspect", "read": "ReadServing", "create": "Create", "copy": "Status",
		"vdiff": "VDiff", "verify": "Verify", "complete": "Complete", "cancel": "Cancel"}[s.M.Stage]; ok {
		return typeName(c) == kind
	}
	switch s.M.Stage {
	case "write":
		w, ok := c.(vreshard.WriteRecord)
		if !ok {
			return false
		}
		target := "none"
		if w.Record.Target != nil {
			target = sideOf(shardNames(*w.Record.Target))
		}
		return sideOf(shardNames(w.Record.Layout)) == s.M.Next.Layout && target == s.M.Next.Target
	case "reads", "writes", "unswitch", "reverse":
		sw, ok := c.(vreshard.Switch)
		if !ok {
			return false
		}
		want := map[string]struct {
			types   string
			reverse bool
		}{"reads": {"replica,rdonly", false}, "writes": {"primary", false}, "unswitch": {"replica,rdonly", true}, "reverse": {"primary,replica,rdonly", true}}[s.M.Stage]
		return strings.Join(sw.Types, ",") == want.types && sw.Reverse == want.reverse
	}
	return false
}
