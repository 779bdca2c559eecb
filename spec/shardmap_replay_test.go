package spec

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/machinetest"
)

// TestModelReplayShardMap is issue 18's model-based test for the ShardMap model: runs its
// simulator generates are replayed on machine/configpush. The replay plays the world the
// machine drives the way each model step says: the driver's Push of the generation its copy
// of the record holds (or of the reshard's target it rendered ahead), a files write that
// lands (the target keeps the newer generation) or is lost, an instance's RELOAD (it
// re-reads the files in place, or it is down) and what it then reports, a step's deadline
// or backoff passing (the machine's timers), the driver restarting (the snapshot round trip
// and Restarted), a pod restarting onto the files or going down. After each step the
// machine must have emitted exactly the model's actions, its state must be the model's
// (the push's generation, whether it ended, the generation written, the stray write, the
// files step and each instance's stage and its reload and observe steps: state, attempt,
// budget), the writes it has on the wire
// the model's, and the world its commands made the model's: the files' generation and what
// each instance routes by.
//
// SPEC_REPLAY_RUNS (default 12) sets how many runs. The same runs replayed on the machine
// with its WriteUnpublished mutant on must fail.
func TestModelReplayShardMap(t *testing.T) {
	runs := modelRuns[smState](t, "ShardMap.qnt", "ShardMapMC", replayRuns(t, 12), 40, "--step=replayStep")
	steps, ended, repushed, late := 0, 0, 0, 0
	for _, r := range runs {
		require.NoError(t, replayShardMap(t, r, configpush.MutantNone))
		steps += len(r.States) - 1
		for i, s := range r.States {
			if slices.Contains(s.S.Emitted, "Done") {
				ended++
			}
			if i == 0 {
				continue
			}
			p := r.States[i-1].S
			if s.Action == "Push" && s.S.Gen == p.Gen && slices.Contains(s.S.Emitted, "Push") {
				repushed++
			}
			if id, _ := s.Picks["i"].(string); s.Action == "ReloadReply" && p.Inst[id].Reload.St == "backoff" ||
				s.Action == "ObserveReply" && p.Inst[id].Observe.St == "backoff" {
				late++
			}
		}
	}
	t.Logf("%d model runs (%d steps) replayed on machine/configpush; %d pushes ended, %d re-pushes, %d late replies taken in a backoff", len(runs), steps, ended, repushed, late)
	require.Greater(t, ended, 0, "no replayed push ended: the replay shows nothing past the files write")
	require.Greater(t, repushed, 0, "no replayed run re-pushed a generation: the replay shows nothing of configpush's repush")
	// The replay has teeth: the machine's WriteUnpublished mutant (the model's mutant of the
	// same name) accepts the Push of a reshard's target the model refuses. Its other two
	// mutants are out of these runs' reach: Regress needs a Push older than one already
	// pushed, which one driver whose copy of the record only moves forward never sends, and
	// NoReloadRetry an instance that reloads onto files older than the push's, which only a
	// late projection of the files (Options.AwaitFiles, not modelled) makes.
	err := firstReplayError(runs, func(r modelRun[smState]) error { return replayShardMap(t, r, configpush.MutantWriteUnpublished) })
	var re *replayError
	require.ErrorAs(t, err, &re, "machine/configpush with MutantWriteUnpublished replayed every model run: the replay does not check the refusal")
	t.Logf("WriteUnpublished: %s", firstLine(err))
}

// The ShardMap model's state, as much of it as the replay reads.
type smRec struct{ Version, Gen, To int }

type smStep struct {
	St             string
	Attempt, Limit int
}

type smInst struct {
	Stage, Failed   string
	Reload, Observe smStep
}

type smState struct {
	Action string
	Picks  map[string]any
	S      struct {
		Drv            smRec
		Files, Written int
		Gen, Stray     int
		Wire           []int
		Routes         map[string]int
		FilesStep      smStep
		Queued, Done   bool
		Inst           map[string]smInst
		Emitted        []string
	}
}

var smInstances = []string{"i1", "i2", "i3"}

// smFiles are the files rendered for generation g (the same for every push of g, so that
// a push of g is never a refresh).
func smFiles(g uint64) render.Files {
	fs, err := render.NewFiles(render.File{Name: "pgdog.toml", Data: fmt.Appendf(nil, "# generation %d\n", g)})
	if err != nil {
		panic(err)
	}
	return fs
}

// smRecord is the record the model's r stands for (database app; generations as the
// model's, the reshard target as State.To).
func smRecord(r smRec) *shardmap.Record {
	rec := &shardmap.Record{Version: uint64(r.Version), Generation: uint64(r.Gen),
		Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	if r.To > 0 {
		rec.State = shardmap.State{Phase: shardmap.Resharding, To: uint64(r.To)}
	}
	return rec
}

// replayTB is the machinetest.TB of a replay: a failure of the snapshot round trip is a
// disagreement at the step being replayed.
type replayTB struct{ fail func(format string, a ...any) }

func (replayTB) Helper()                          {}
func (r replayTB) Fatalf(format string, a ...any) { r.fail(format, a...) }

// replayShardMap feeds one model run to a fresh machine (with mu on) and returns the first
// step where the machine does not do what the model did.
func replayShardMap(t *testing.T, run modelRun[smState], mu configpush.Mutant) (err error) {
	t.Helper()
	states := run.States
	opts := configpush.Options{MaxAttempts: 2, Mutant: mu}
	m := configpush.New(opts)
	rp := newReplayer(run.Name, func(i int) string { return states[i].Action })
	tr, rng, fail := rp.tr, rp.rng, rp.fail
	timers := machinetest.Timers{}
	now := int64(1000)
	// The world: the files' generation, what each instance routes by and whether it is up,
	// the files writes on the wire (by generation: the model's wire), the instance commands
	// awaiting their answer.
	files := 1
	routes := map[string]int{"i1": 1, "i2": 1, "i3": 1}
	up := map[string]bool{"i1": true, "i2": true, "i3": true}
	wire := map[int]configpush.WriteFiles{}
	out := map[string]configpush.Command{}
	// late: the instance commands whose deadline passed, by step id (the last attempt of
	// each): the model may still deliver their success (its Step.late).
	late := map[string]configpush.Command{}
	defer recoverReplay(&err)
	feed := func(in configpush.Input) {
		now++
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in) {
			rp.log = append(rp.log, fmt.Sprintf("      cmd %T%+v", c, c))
			if timers.Record(c) {
				continue
			}
			switch c := c.(type) {
			case configpush.WriteFiles:
				wire[int(c.Generation)] = c
			case configpush.Reload:
				out[c.Instance] = c
			case configpush.Observe:
				out[c.Instance] = c
			case configpush.Outcome:
			default:
				fail("the replay cannot answer %T", c)
			}
		}
	}
	fire := func(id string) {
		at, ok := timers.Take(id)
		if !ok {
			fail("the model's step fires timer %s, the machine set none (timers %v)", id, timers.List())
		}
		now = max(now, at)
		feed(configpush.TimerFired{ID: id})
	}
	// answer takes the command awaiting its answer for instance id, of the kind the model
	// answers; in the step's backoff (prev, the model's step before the answer), the last
	// one of the step whose deadline passed: a late reply.
	answer := func(id, kind string, gen int, prev smStep) configpush.Command {
		if prev.St == "backoff" {
			step := fmt.Sprintf("g%d/%s/%s", gen, strings.ToLower(kind), id)
			c, ok := late[step]
			if !ok {
				fail("the model answers %s of %s late, in its backoff, the machine has no command of %s past its deadline", kind, id, step)
			}
			return c
		}
		c, ok := out[id]
		if !ok || typeName(c) != kind {
			fail("the model answers %s of %s, the machine has %v in flight for it", kind, id, typeName(c))
		}
		delete(out, id)
		return c
	}
	for i := 1; i < len(states); i++ {
		rp.step = i
		p, s := states[i-1].S, states[i].S
		act, picks := states[i].Action, states[i].Picks
		if act == "" && len(s.Emitted) > 0 {
			act = s.Emitted[0] // Timeout and Retry: their any inside an all may leave them unnamed in the ITF
		}
		if named, ok := map[string]string{"timeoutOf": "Timeout", "retryOf": "Retry"}[act]; ok {
			act = named // or named by the step they take
		}
		id, _ := picks["i"].(string)
		g, _ := picks["g"].(int)
		rp.log = append(rp.log, fmt.Sprintf("  %d %s %v -> model gen=%d done=%v files=%+v stray=%d wire=%v inst=%v emitted=%v",
			i, act, picks, s.Gen, s.Done, s.FilesStep, s.Stray, s.Wire, s.Inst, s.Emitted))
		switch act {
		case "Read", "BeginReshard", "PublishCas", "DriverRead": // the store and the driver's watch
		case "Push":
			feed(configpush.Push{Record: smRecord(p.Drv), Generation: uint64(g), Files: smFiles(uint64(g)), Instances: smInstances})
		case "Land":
			c, ok := wire[g]
			if !ok {
				fail("the model lands a write of generation %d, the machine sent none", g)
			}
			delete(wire, g)
			var werr error
			if files > g {
				werr = fmt.Errorf("generation %d over %d: %w", g, files, configpush.ErrNewerGeneration)
			} else {
				files = g
			}
			feed(configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: werr})
		case "Lose":
			delete(wire, g)
		case "ReloadReply":
			c := answer(id, "Reload", p.Gen, p.Inst[id].Reload).(configpush.Reload)
			var rerr error
			if up[id] {
				routes[id] = files
			} else {
				rerr = errors.New("reload: connection refused")
			}
			feed(configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: id, Err: rerr})
		case "ObserveReply":
			c := answer(id, "Observe", p.Gen, p.Inst[id].Observe).(configpush.Observe)
			known, _ := picks["known"].(bool)
			o := configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: id, Generation: uint64(routes[id]), Known: known}
			if !up[id] {
				o.Err = errors.New("show pools: connection refused")
			}
			feed(o)
		case "Timeout", "Retry":
			if id == "" {
				fire(fmt.Sprintf("g%d/files", p.Gen))
				break
			}
			if c, ok := out[id]; ok && act == "Timeout" { // its reply may still come, late
				step, _ := stepOf(c)
				late[step] = c
			}
			delete(out, id)
			fire(fmt.Sprintf("g%d/instance/%s", p.Gen, id))
		case "StrayTimeout":
			fire(fmt.Sprintf("g%d/files", p.Stray))
		case "DriverRestart":
			// The driver dies (its timers and the replies it awaited with it) and a new one
			// restores the snapshot with the files rendered again for the push's generation.
			// A write the model lost stays lost when the machine sends it again.
			snap := m.Snapshot()
			gen := max(snap.Written, 1)
			if snap.Push != nil {
				gen = max(gen, snap.Push.Generation)
			}
			m = machinetest.RoundTrip(replayTB{fail}, m, func(sn configpush.Snapshot) (*configpush.Machine, error) {
				return configpush.RestoreWithFiles(sn, smRecord(smRec{Version: 1, Gen: int(gen)}), smFiles(gen), opts)
			})
			timers, out = machinetest.Timers{}, map[string]configpush.Command{}
			onWire := maps.Clone(wire)
			feed(configpush.Restarted{})
			for g := range wire {
				if _, ok := onWire[g]; !ok {
					delete(wire, g)
				}
			}
		case "InstanceRestart":
			routes[id], up[id] = files, true
		case "InstanceDown":
			up[id] = false
		default:
			fail("unknown model action %q", act)
		}
		if acts := tr.Take(); !sameActions(acts, s.Emitted) {
			fail("the machine emitted %v, the model %v", actionsOf(acts), s.Emitted)
		}
		// The world.
		if files != s.Files || !maps.Equal(routes, s.Routes) {
			fail("the world has files %d and routes %v, the model files %d and routes %v", files, routes, s.Files, s.Routes)
		}
		if got := slices.Sorted(maps.Keys(wire)); !slices.Equal(got, slices.Sorted(slices.Values(s.Wire))) {
			fail("the machine has writes of generations %v on the wire, the model %v", got, s.Wire)
		}
		// The machine's state.
		if msg := smCompare(m.Snapshot(), s.Gen, s.Done, s.Written, s.Stray, s.Queued, s.FilesStep, s.Inst); msg != "" {
			fail("%s", msg)
		}
		// The instance commands awaiting an answer: one for each instance whose step the model
		// has awaiting, of its stage's kind and the push's generation.
		for _, id := range smInstances {
			want := ""
			if n := s.Inst[id]; s.Gen > 0 && (n.Stage == "reload" && n.Reload.St == "awaiting" || n.Stage == "observe" && n.Observe.St == "awaiting") {
				want = map[string]string{"reload": "Reload", "observe": "Observe"}[n.Stage]
			}
			c, ok := out[id]
			got := ""
			if ok {
				got = typeName(c)
				if step, _ := stepOf(c); !strings.HasPrefix(step, fmt.Sprintf("g%d/", s.Gen)) {
					delete(out, id) // an older push's command: its late answer is never delivered
					got = ""
				}
			}
			if got != want {
				fail("instance %s: the machine has %q in flight, the model %q", id, got, want)
			}
		}
	}
	return nil
}

// smCompare says how the machine's snapshot differs from the model's state, or "".
func smCompare(sn configpush.Snapshot, gen int, done bool, written, stray int, queued bool, fs smStep, inst map[string]smInst) string {
	if gen == 0 {
		if sn.Push != nil {
			return fmt.Sprintf("the machine pushes generation %d, the model none", sn.Push.Generation)
		}
		return ""
	}
	pr := sn.Push
	if pr == nil || int(pr.Generation) != gen || pr.Done != done {
		return fmt.Sprintf("the machine's push is %+v, the model's generation %d done=%v", pr, gen, done)
	}
	if max(int(sn.Written), 1) != written {
		return fmt.Sprintf("the machine wrote generation %d, the model %d", sn.Written, written)
	}
	gotStray := 0
	if sn.Stray != nil {
		gotStray = int(sn.Stray.Generation)
	}
	if gotStray != stray {
		return fmt.Sprintf("the machine's stray write is of generation %d, the model's %d", gotStray, stray)
	}
	if !sameStep(pr.FilesStep, fs) || (pr.FilesStep.State == configpush.StepQueued) != (queued && !done) {
		return fmt.Sprintf("the machine's files step is %+v, the model's %+v queued=%v", pr.FilesStep, fs, queued)
	}
	for _, in := range pr.Instances {
		n := inst[in.ID]
		if string(in.Stage) != n.Stage || string(in.Failed) != n.Failed {
			return fmt.Sprintf("instance %s: the machine's stage is %s (failed %q), the model's %s (failed %q)", in.ID, in.Stage, in.Failed, n.Stage, n.Failed)
		}
		// Both count a step's attempts over the push, and give each run of it (a re-push
		// begins one again) a budget, Limit.
		if !sameStep(in.Reload, n.Reload) || !sameStep(in.Observe, n.Observe) {
			return fmt.Sprintf("instance %s: the machine's reload and observe steps are %+v, %+v, the model's %+v, %+v", in.ID, in.Reload, in.Observe, n.Reload, n.Observe)
		}
	}
	return ""
}

// sameStep says whether the machine's step is the model's: its state (queued is the
// model's idle files step with queued set), its last attempt and its budget.
func sameStep(st configpush.Step, m smStep) bool {
	state := map[configpush.StepState]string{configpush.StepIdle: "idle", configpush.StepQueued: "idle",
		configpush.StepAwaiting: "awaiting", configpush.StepBackoff: "backoff", configpush.StepDone: "done"}[st.State]
	return state == m.St && st.Attempt == m.Attempt && st.Limit == m.Limit
}
