package spec

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
	"loam.dev/router/machine/machinetest"
)

// TestModelReplayCutover is issue 18's model-based test for the Cutover model: runs its
// simulator generates are replayed on machine/cutover. The replay plays what the machine
// drives (the store, the PgDog instances d, i2, i3 and the shards' fences) the way each
// model step says: a step of the machine answers every command of the stage in flight
// (Pause with the instance the model's pick misses failing, a Fence failing on one shard,
// CUTOVER taking, failing, swapping and failing, or losing its answer, a Reload failing on
// the instance picked...), the operator's Finalize and Reverse become the machine's inputs,
// the grace and catch-up deadlines its timers, and the environment's steps (an instance
// restarting onto the files, a lost CUTOVER landing, another writer's harmless rewrite
// before a compare-and-set) change the world the next answers come from. After each step
// the machine must have emitted the model's actions (each run of one action folded into
// one, as the machine emits one per instance or shard), have in flight exactly the commands
// of the stage the model is in (or none, or Done with the model's outcome), and the world
// its commands made must be the model's: each instance's routing and hold, each layout's
// fence, the stored generation and layout, the files' generation and layout.
//
// The machine runs with Attempts 1, so that a failed answer is the failure for good the
// model takes (persistent steps, which the model never fails, are retried regardless).
// SPEC_REPLAY_RUNS (default 150: 12 did not reach the reverse whose lost CUTOVER lands while
// it is resolved, which 150 do, and which the model had wrong) sets how many runs. The same runs replayed on the machine
// with its SkipFence mutant on must fail.
func TestModelReplayCutover(t *testing.T) {
	runs := modelRuns[cutState](t, "Cutover.qnt", "CutoverMC", replayRuns(t, 150), 80, "--step=replayStep")
	outcomes := map[string]int{}
	steps, again := 0, 0
	distinct := map[string]bool{}
	for _, r := range runs {
		n, err := replayCutover(r, cutover.Mutants{})
		require.NoError(t, err)
		steps += n
		last := r.States[len(r.States)-1].S
		outcomes[last.Outcome]++
		var acts []string
		for i, s := range r.States {
			acts = append(acts, s.Action)
			if s.Action == "Reverse" && s.S.Reverse && i > 0 && r.States[i-1].S.ReversedOnce {
				again++ // a reverse started after a rolled-back one whose CUTOVER went out
			}
		}
		distinct[strings.Join(acts, ",")] = true
	}
	t.Logf("%d model runs (%d distinct, %d steps) replayed on machine/cutover; outcomes %v; %d reverses after a rolled-back one",
		len(runs), len(distinct), steps, outcomes, again)
	require.Greater(t, outcomes["finalized"]+outcomes["reversed"], 0, "no replayed run got past the point of no return")
	_, err := firstCutoverError(runs, cutover.Mutants{SkipFence: true})
	require.Error(t, err, "machine/cutover with SkipFence replayed every model run: the replay does not check the fence")
	t.Logf("SkipFence: %s", firstLine(err))
}

func firstCutoverError(runs []modelRun[cutState], mu cutover.Mutants) (int, error) {
	for i, r := range runs {
		if _, err := replayCutover(r, mu); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// cutModel is the Cutover model's state, as much of it as the replay reads.
type cutModel struct {
	Stage, Outcome, StoreLayout, FilesLayout, LateCut string
	Reverse, Known, Reknown, ReversedOnce, CopyTask   bool
	Pos, StoreGen, FilesGen                           int
	Route                                             map[string]string
	Paused, Fenced                                    map[string]bool
	Emitted                                           []string
}

type cutState struct {
	Action string
	Picks  map[string]any
	S      cutModel
}

// cutSteps is the model's Steps (Mutant "none").
var cutSteps = []string{"pause", "fence", "cutover", "repause", "publish", "open", "files", "reload", "resume", "check"}

func (m cutModel) curStep() string {
	if m.Stage == "steps" {
		return cutSteps[m.Pos]
	}
	return m.Stage
}

// cutCommand is the kind of command the machine has in flight in each model stage (none for
// the stages that wait on the operator or a timer).
var cutCommand = map[string]string{
	"begin": "WriteRecord", "copy": "CopyData", "catchup": "PollCopy", "pause": "Pause", "fence": "Fence",
	"cutover": "Cutover", "resolve": "ListTasks", "repause": "Pause", "publish": "WriteRecord", "open": "Unfence",
	"files": "WriteFiles", "reload": "Reload", "resume": "Resume", "check": "ListTasks", "checkreload": "Reload",
	"undo/reload": "Reload", "undo/unfence": "Unfence", "undo/resume": "Resume", "undo/stop": "StopTask",
	"undo/record": "WriteRecord", "stop": "StopTask", "finalreload": "Reload", "unfence": "Unfence", "finish": "WriteRecord",
}

// cutoverRecord is database app on two shards at generation 4, resharding to four (n0-n3).
func cutoverRecord() *shardmap.Record {
	be := func(host string) shardmap.Backend { return shardmap.Backend{Host: host, Port: 5432, Database: "app"} }
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r := shardmap.NewPgHash("app", key, be("10.0.1.1"), be("10.0.1.2"))
	r.Version, r.Generation = 12, 4
	tl := shardmap.NewPgHash("app", key, be("10.0.2.1"), be("10.0.2.2"), be("10.0.2.3"), be("10.0.2.4")).Layout
	for i := range tl.Shards {
		tl.Shards[i].Name = fmt.Sprintf("n%d", i)
	}
	r.Target = &tl
	r.State = shardmap.State{Phase: shardmap.Resharding, To: 5}
	return r
}

// cutWorld is what the machine drives, reduced to what the model holds.
type cutWorld struct {
	store    *shardmap.Record
	filesGen uint64
	filesOn  string
	route    map[string]string
	paused   map[string]bool
	fenced   map[string]bool // shard -> fenced
	shards   map[string][]string
	tasks    map[int64]cutover.TaskState // on d
	next     int64
	late     *cutover.Cutover // a CUTOVER whose answer was lost
}

func layoutOf(r *shardmap.Record) string {
	if len(r.Layout.Shards) == 4 {
		return "dst"
	}
	return "src"
}

func (w *cutWorld) layoutFenced(l string) bool {
	for _, sh := range w.shards[l] {
		if !w.fenced[sh] {
			return false
		}
	}
	return true
}

// cut runs a CUTOVER of task on d: it finishes the task, swaps d's routing the other way
// and starts the stream back (the model's swap). It returns false when the task is not
// replicating (d restarted and lost it): PgDog refuses.
func (w *cutWorld) cut(c cutover.Cutover, to string, failAfterSwap bool) bool {
	if w.tasks[c.Task] != cutover.TaskReplicating {
		return false
	}
	w.tasks[c.Task] = cutover.TaskFinished
	if failAfterSwap {
		w.tasks[c.Task] = cutover.TaskFailed
	}
	w.tasks[w.next] = cutover.TaskReplicating
	w.next++
	w.route["d"] = to
	w.paused["d"] = false
	return true
}

func (w *cutWorld) listed() []cutover.Task {
	var ts []cutover.Task
	for id, st := range w.tasks {
		ts = append(ts, cutover.Task{ID: id, State: st})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	return ts
}

// noStop is the model's stage "stop" of a reverse that knows no stream of its CUTOVER to
// stop: the model ends it with a step of its own (StopTask emitting only Done), where the
// machine, with nothing to send, ends at once.
func noStop(m cutModel) bool { return m.curStep() == "stop" && m.Reverse && !m.Reknown }

var errReplay = errors.New("replay: the model's pick fails this command")

// replayCutover feeds one model run to a fresh machine (with mu on); it returns the steps
// replayed and the first disagreement.
func replayCutover(run modelRun[cutState], mu cutover.Mutants) (steps int, err error) {
	states := run.States
	rec := cutoverRecord()
	w := &cutWorld{store: rec.Clone(), filesGen: rec.Generation, filesOn: "src",
		route: map[string]string{"d": "src", "i2": "src", "i3": "src"}, paused: map[string]bool{},
		fenced: map[string]bool{}, tasks: map[int64]cutover.TaskState{}, next: 1,
		shards: map[string][]string{"src": shardNames(rec.Layout), "dst": shardNames(*rec.Target)}}
	plan := cutover.Plan{Designated: "d", Instances: []string{"d", "i2", "i3"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{Attempts: 1, InstanceAttempts: 1, Mutants: mu}}
	m := cutover.New()
	tr := &machine.Recorder{}
	rng := rand.New(rand.NewPCG(1, 2))
	timers := machinetest.Timers{}
	now := int64(1000)
	var pending []cutover.Command
	var done *cutover.Done
	var log []string
	fail := func(i int, format string, a ...any) {
		panic(&replayError{Run: run.Name, Step: i, Action: states[i].Action, Msg: fmt.Sprintf(format, a...), Log: log})
	}
	defer recoverReplay(&err)
	feed := func(in cutover.Input) {
		now += 1000
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in) {
			log = append(log, "      cmd "+c.String())
			if timers.Record(c) {
				continue
			}
			switch c := c.(type) {
			case cutover.Alert:
			case cutover.Done:
				done = &c
			default:
				pending = append(pending, c)
			}
		}
	}
	// take removes and returns the commands in flight of one kind.
	take := func(i int, kind string) []cutover.Command {
		var out, rest []cutover.Command
		for _, c := range pending {
			if typeName(c) == kind {
				out = append(out, c)
			} else {
				rest = append(rest, c)
			}
		}
		pending = rest
		if len(out) == 0 {
			fail(i, "the model answers %s but the machine has none in flight (in flight: %v)", kind, pending)
		}
		return out
	}
	fire := func(i int, suffix string) {
		for id, at := range timers {
			if strings.HasSuffix(id, suffix) {
				timers.Take(id)
				now = max(now, at)
				feed(cutover.TimerFired{ID: id})
				return
			}
		}
		fail(i, "the model fires the %s timer but the machine set none (timers %v)", suffix, timers.List())
	}
	cas := func(c cutover.WriteRecord) cutover.Input {
		if c.Expect != w.store.Version {
			return cutover.RecordWritten{Step: c.Step, Conflict: w.store.Clone(), Err: errors.New("conflict")}
		}
		w.store = c.Record.Clone()
		w.store.Version = c.Expect + 1
		return cutover.RecordWritten{Step: c.Step, Version: w.store.Version}
	}
	reply := func(c cutover.Command, err error) { step, _ := stepOf(c); feed(cutover.Reply{Step: step, Err: err}) }
	errIf := func(b bool) error {
		if b {
			return errReplay
		}
		return nil
	}
	restart := func(inst string) {
		w.route[inst], w.paused[inst] = w.filesOn, false
		if inst == "d" {
			for id, st := range w.tasks {
				if st == cutover.TaskSyncing || st == cutover.TaskReplicating {
					delete(w.tasks, id)
				}
			}
		}
	}
	// answer runs each command's effect on the world and feeds its answer; failed says
	// which fail (their effect does not happen).
	answer := func(i int, kind string, failed func(cutover.Command) bool) {
		for _, c := range take(i, kind) {
			bad := failed != nil && failed(c)
			switch c := c.(type) {
			case cutover.WriteRecord:
				feed(cas(c))
			case cutover.ListTasks:
				if bad {
					feed(cutover.TasksListed{Step: c.Step, Err: errReplay})
				} else {
					feed(cutover.TasksListed{Step: c.Step, Tasks: w.listed()})
				}
			case cutover.Pause:
				w.paused[c.Instance] = w.paused[c.Instance] || !bad
				reply(c, errIf(bad))
			case cutover.Resume:
				if !bad {
					w.paused[c.Instance] = false
				}
				reply(c, errIf(bad))
			case cutover.Fence: // a failed fence took on its shard (an error answer may be one that did)
				w.fenced[c.Shard] = true
				reply(c, errIf(bad))
			case cutover.Unfence:
				w.fenced[c.Shard] = false
				reply(c, nil)
			case cutover.WriteFiles:
				w.filesGen, w.filesOn = c.Generation, layoutOf(c.Record)
				reply(c, nil)
			case cutover.Reload:
				if !bad {
					w.route[c.Instance] = layoutOf(c.Record)
				}
				reply(c, errIf(bad))
			case cutover.StopTask:
				if st, ok := w.tasks[c.Task]; ok && st != cutover.TaskFinished {
					w.tasks[c.Task] = cutover.TaskCancelled
				}
				reply(c, nil)
			default:
				fail(i, "the replay cannot answer %s", c)
			}
		}
	}
	for i := 1; i < len(states); i++ {
		p, s := states[i-1].S, states[i].S
		// replayStep's PauseWith, FenceWith... are the steps with every command succeeding
		// (no picks: missed and failed empty, ok true, the CUTOVER taking).
		act := strings.TrimSuffix(states[i].Action, "With")
		picks := states[i].Picks
		okPick := func() bool { b, has := picks["ok"].(bool); return b || !has }
		log = append(log, fmt.Sprintf("  %d %s %v -> model %s emitted=%v", i, act, picks, s.curStep(), s.Emitted))
		switch act {
		case "Start":
			feed(cutover.Start{Record: rec.Clone(), Plan: plan})
		case "Begin", "Publish", "Finish", "UndoRecord":
			answer(i, "WriteRecord", nil)
		case "Rebase":
			w.store = w.store.Clone()
			w.store.Version++
			answer(i, "WriteRecord", nil)
		case "CopyData":
			c := take(i, "CopyData")[0].(cutover.CopyData)
			w.tasks[w.next] = cutover.TaskReplicating
			feed(cutover.CopyStarted{Step: c.Step, Task: w.next})
			w.next++
		case "Poll", "CaughtUp", "PollFailed":
			c := take(i, "PollCopy")[0].(cutover.PollCopy)
			st := w.tasks[c.Task] // not listed once d restarted: the model's PollFailed then
			lag := map[string]int64{"Poll": 1 << 40, "CaughtUp": 0, "PollFailed": 0}[act]
			if act == "PollFailed" && p.CopyTask {
				st = cutover.TaskFailed
			}
			feed(cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: c.Task, State: st}, LagBytes: lag})
			if act == "Poll" {
				fire(i, "catchup/next")
			}
		case "Timeout":
			fire(i, "catchup/deadline")
		case "Pause":
			missed, _ := picks["missed"].([]any)
			answer(i, "Pause", func(c cutover.Command) bool {
				return slices.Contains(missed, any(c.(cutover.Pause).Instance))
			})
		case "Fence":
			first := true
			answer(i, "Fence", func(cutover.Command) bool {
				bad := first && !okPick()
				first = false
				return bad
			})
		case "Cutover":
			c := take(i, "Cutover")[0].(cutover.Cutover)
			to := map[bool]string{false: "dst", true: "src"}[p.Reverse]
			switch pick, _ := picks["pick"].(string); pick {
			case "took", "":
				reply(c, errIf(!w.cut(c, to, false)))
			case "swapfailed":
				w.cut(c, to, true)
				reply(c, errors.New("cutover: saving the configuration failed after the swap"))
			case "lost":
				if w.tasks[c.Task] == cutover.TaskReplicating {
					w.late = &c
				}
				reply(c, errors.New("cutover: connection reset: may have applied"))
			default:
				reply(c, errors.New("cutover: refused"))
			}
		case "Resolve":
			answer(i, "ListTasks", nil)
		case "Repause":
			answer(i, "Pause", func(cutover.Command) bool { return !okPick() })
		case "Open", "FinalUnfence", "UndoUnfence":
			answer(i, "Unfence", nil)
		case "Files":
			answer(i, "WriteFiles", nil)
		case "Reload":
			failed, _ := picks["failed"].([]any)
			answer(i, "Reload", func(c cutover.Command) bool { return slices.Contains(failed, any(c.(cutover.Reload).Instance)) })
		case "Resume", "UndoResume":
			answer(i, "Resume", nil)
		case "Check":
			answer(i, "ListTasks", func(cutover.Command) bool { return !okPick() })
		case "CheckReload", "FinalReload":
			answer(i, "Reload", func(cutover.Command) bool { return !okPick() })
		case "UndoReload":
			answer(i, "Reload", nil)
		case "UndoStop", "StopTask":
			if noStop(p) {
				break // the model's own step for a reverse with no stream to stop; the machine ended already
			}
			answer(i, "StopTask", nil)
		case "GraceOver":
			fire(i, "grace")
		case "Finalize":
			feed(cutover.Finalize{})
		case "Reverse":
			feed(cutover.Reverse{})
		case "Write":
		case "RestartInstance":
			inst, _ := picks["i"].(string)
			restart(inst)
		case "RestartDesignated", "RestartDesignatedAfterCutover":
			restart("d")
		case "LandLate":
			if w.late != nil && !w.cut(*w.late, p.LateCut, false) {
				// The model lands it whatever became of the task: d swaps (its worst case).
				w.route["d"] = p.LateCut
				w.paused["d"] = false
			}
			w.late = nil
		default:
			fail(i, "unknown model action %q", act)
		}
		if done != nil && s.Stage == "done" && p.Stage != "done" && !noStop(p) {
			// ConfigPush pushes the record Done names (files too): the model's UndoRecord and Finish.
			w.filesGen, w.filesOn = w.store.Generation, layoutOf(w.store)
		}
		// The actions: each run of one folded into one; the model's CaughtUp is the poll
		// that finds the copy caught up.
		var acts []string
		for _, e := range tr.Take() {
			if n := len(acts); n == 0 || acts[n-1] != e.Action {
				acts = append(acts, e.Action)
			}
		}
		want := s.Emitted
		switch {
		case act == "CaughtUp":
			want = append([]string{"Poll"}, want...)
		case noStop(s) && !noStop(p):
			want = append(slices.Clone(want), "Done") // the machine ends a step earlier (see noStop)
		case noStop(p):
			want = nil
		}
		if !slices.Equal(acts, want) && len(acts)+len(want) > 0 {
			fail(i, "the machine emitted %v, the model %v", acts, want)
		}
		// The commands in flight: those of the model's stage, or none. A poll of the copy
		// the machine stopped waiting for (the catch-up deadline fired while it was out) is
		// answered as a driver would, and ignored.
		kind := cutCommand[s.curStep()]
		if kind != "PollCopy" {
			for _, c := range pending {
				if c, ok := c.(cutover.PollCopy); ok {
					take(i, "PollCopy")
					feed(cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: c.Task, State: w.tasks[c.Task]}, LagBytes: 1 << 40})
					break
				}
			}
		}
		for _, c := range pending {
			if typeName(c) != kind {
				fail(i, "the machine has %s in flight, the model's stage %s wants %q", c, s.curStep(), kind)
			}
		}
		switch {
		case s.Stage == "done" && p.Stage != "done" || noStop(s):
			if done == nil {
				fail(i, "the model ended %s but the machine sent no Done", s.Outcome)
			}
			if got := strings.ReplaceAll(done.Outcome.String(), "_", ""); got != s.Outcome && !noStop(s) {
				fail(i, "the machine ended %s, the model %s", done.Outcome, s.Outcome)
			}
		case s.Stage != "done" && done != nil:
			fail(i, "the machine ended %s, the model is at %s", done.Outcome, s.curStep())
		case kind != "" && len(pending) == 0 && !noStop(s):
			fail(i, "the model's stage %s has %s in flight, the machine sent none", s.curStep(), kind)
		}
		// The world the machine's commands made is the model's.
		got := cutModel{StoreGen: int(w.store.Generation) - 3, StoreLayout: layoutOf(w.store),
			FilesGen: int(w.filesGen) - 3, FilesLayout: w.filesOn, Route: w.route,
			Paused: map[string]bool{"d": w.paused["d"], "i2": w.paused["i2"], "i3": w.paused["i3"]},
			Fenced: map[string]bool{"src": w.layoutFenced("src"), "dst": w.layoutFenced("dst")}}
		wantW := cutModel{StoreGen: s.StoreGen, StoreLayout: s.StoreLayout, FilesGen: s.FilesGen, FilesLayout: s.FilesLayout,
			Route: s.Route, Paused: s.Paused, Fenced: s.Fenced}
		if fmt.Sprint(got) != fmt.Sprint(wantW) {
			fail(i, "the world holds %+v, the model's %+v", got, wantW)
		}
	}
	return len(states) - 1, nil
}

// TestModelReplayCutoverReverseAgain replays saved model runs (testdata/cutover-reverse-again,
// from quint run --mbt at seed 1, 2,400 samples) in which a Reverse follows a rolled-back
// reverse whose CUTOVER went out and its stream was found finished: the runs the model once
// refused and the CI-sized replay does not reach. The machine must abandon each such reverse
// as the model does; trusting the finished stream (StaleReverseTrusted) must fail one.
func TestModelReplayCutoverReverseAgain(t *testing.T) {
	runs := readRuns[cutState](t, "testdata/cutover-reverse-again")
	for _, r := range runs {
		again := false
		for i, s := range r.States {
			again = again || s.Action == "Reverse" && s.S.Reverse && i > 0 && r.States[i-1].S.ReversedOnce
		}
		require.True(t, again, "%s: no Reverse after a rolled-back reverse", r.Name)
		n, err := replayCutover(r, cutover.Mutants{})
		require.NoError(t, err)
		require.Equal(t, len(r.States)-1, n, "%s replayed in part", r.Name)
	}
	_, err := firstCutoverError(runs, cutover.Mutants{StaleReverseTrusted: true})
	require.Error(t, err, "machine/cutover trusting a stream an earlier reverse's CUTOVER may have finished replayed every run")
	t.Logf("StaleReverseTrusted: %s", firstLine(err))
}
