package cutover_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
	"loam.dev/router/machine/machinetest"
)

// TestInteraction replays the scripts in testdata/interaction/, each also with the machine
// restored from its snapshot before every directive (see machinetest.Scripts). Each script
// drives one cutover through the world model; the output is every command the machine
// issued and every spec event it emitted, plus any invariant the world saw broken.
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata/interaction", func() *harness { return &harness{} })
}

// harness plays the driver: it keeps the commands in flight, the timers and the clock,
// and answers through the world model.
type harness struct {
	m       *cutover.Machine
	w       *world
	rec     *machine.Recorder
	now     int64
	rng     *rand.Rand
	pending []cutover.Command
	answers []cutover.Input   // every answer delivered since start, for late
	landing []cutover.Cutover // CUTOVERs answered failed that still arrive (see land)
	timers  machinetest.Timers
	mutant  bool
	seen    []string // every violation since start
	out     strings.Builder
}

// Restore implements machinetest.Harness.
func (h *harness) Restore(t testing.TB) {
	if h.m != nil {
		h.m = machinetest.RoundTrip(t, h.m, cutover.Restore)
	}
}

func (h *harness) ctx() *machine.Ctx {
	return &machine.Ctx{Now: h.now, Rand: h.rng, Trace: h.rec}
}

// step feeds one input and prints what it produced under a header.
func (h *harness) step(header string, in cutover.Input) {
	cmds := h.m.On(h.ctx(), in)
	fmt.Fprintf(&h.out, "> %s\n", header)
	h.record(cmds)
}

func (h *harness) record(cmds []cutover.Command) {
	for _, e := range h.rec.Take() {
		fmt.Fprintf(&h.out, "  spec %s\n", e)
	}
	for _, c := range cmds {
		fmt.Fprintf(&h.out, "  cmd  %s\n", c)
		if h.timers.Record(c) {
			continue
		}
		switch c := c.(type) {
		case cutover.Done:
			h.w.checkEnd(c)
		case cutover.Alert:
			h.w.alert(c)
		default:
			h.w.send(c)
			h.pending = append(h.pending, c)
		}
	}
	h.flushViolations()
}

// flushViolations prints the world's new violations and keeps them for expect-violation.
func (h *harness) flushViolations() {
	for _, v := range h.w.violations {
		fmt.Fprintf(&h.out, "  !! violation: %s\n", v)
	}
	h.seen = append(h.seen, h.w.violations...)
	h.w.violations = nil
}

// Handle implements machinetest.Harness.
func (h *harness) Handle(t *testing.T, d *datadriven.TestData) string {
	h.out.Reset()
	switch d.Cmd {
	case "start":
		h.start(t, d)
	case "deliver":
		h.deliver(t, d)
	case "stabilize":
		h.stabilize(t, d)
	case "late":
		h.late(t, d)
	case "land":
		h.land(t, d)
	case "conflict":
		h.conflict(t, d)
	case "tick":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		h.now += ms
		h.fireDue()
	case "restart":
		h.restart(t, d)
	case "restart-instance":
		// An instance's process restarts (not the driver's): restart-instance name=pgdog-1.
		h.w.restartInstance(machinetest.Arg(t, d, "name", ""))
		h.flushViolations()
		h.printWorld()
	case "finalize":
		h.step("finalize", cutover.Finalize{})
	case "reverse":
		h.step("reverse", cutover.Reverse{})
	case "world":
		h.w.lag = machinetest.Arg(t, d, "lag", h.w.lag)
		h.w.syncPolls = machinetest.Arg(t, d, "sync-polls", h.w.syncPolls)
		h.printWorld()
	case "task":
		// Set a task's state on the designated instance: task id=7 state=cutting_over.
		var id int64
		var st string
		d.ScanArgs(t, "id", &id)
		d.ScanArgs(t, "state", &st)
		states := map[string]cutover.TaskState{"syncing": cutover.TaskSyncing, "replicating": cutover.TaskReplicating,
			"cutting_over": cutover.TaskCuttingOver, "finished": cutover.TaskFinished, "failed": cutover.TaskFailed,
			"cancelled": cutover.TaskCancelled}
		ts, ok := states[st]
		if !ok {
			t.Fatalf("unknown task state %q", st)
		}
		h.w.tasks[id] = ts
		if machinetest.Arg(t, d, "kind", "") == "copy" {
			h.w.kinds[id] = "reshard " + h.w.copyOf() // kind=copy: SHOW TASKS names it this cutover's copy
		}
		h.printWorld()
	case "expect-violation":
		// The input text must occur in a violation seen since start: a mutant script
		// asserts that its invariant tripped, whatever the golden output says.
		for _, v := range h.seen {
			if strings.Contains(v, strings.TrimSpace(d.Input)) {
				return "caught\n"
			}
		}
		t.Errorf("%s: no violation contains %q; seen %q", d.Pos, d.Input, h.seen)
		return "not caught\n"
	case "pending":
		for _, c := range h.pending {
			fmt.Fprintf(&h.out, "%s\n", c)
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if h.mutant {
		return h.out.String()
	}
	if strings.Contains(h.out.String(), "!! violation") {
		t.Errorf("%s: invariant broken without a mutant:\n%s", d.Pos, h.out.String())
	}
	return h.out.String()
}

// scriptMutants are the mutants a script can start with (start mutant=<name>).
var scriptMutants = map[string]func(*cutover.Mutants){
	"skip-fence":                   func(m *cutover.Mutants) { m.SkipFence = true },
	"publish-before-cutover":       func(m *cutover.Mutants) { m.PublishBeforeCutover = true },
	"resume-before-publish":        func(m *cutover.Mutants) { m.ResumeBeforePublish = true },
	"files-before-publish":         func(m *cutover.Mutants) { m.FilesBeforePublish = true },
	"skip-designated-reload":       func(m *cutover.Mutants) { m.SkipDesignatedReload = true },
	"retry-reuses-step":            func(m *cutover.Mutants) { m.RetryReusesStep = true },
	"unfenced-destination":         func(m *cutover.Mutants) { m.UnfencedDestination = true },
	"open-destination-on-rollback": func(m *cutover.Mutants) { m.OpenDestinationOnRollback = true },
	"missed-forward-only":          func(m *cutover.Mutants) { m.MissedForwardOnly = true },
	"skip-final-reload":            func(m *cutover.Mutants) { m.SkipFinalReload = true },
	"skip-check":                   func(m *cutover.Mutants) { m.SkipCheck = true },
	"reverse-keeps-designated":     func(m *cutover.Mutants) { m.ReverseKeepsDesignated = true },
	"silent-lost-copy":             func(m *cutover.Mutants) { m.SilentLostCopy = true },
	"skip-drain":                   func(m *cutover.Mutants) { m.SkipDrain = true },
	"adopt-any-task":               func(m *cutover.Mutants) { m.AdoptAnyTask = true },
	"stop-gives-up":                func(m *cutover.Mutants) { m.StopGivesUp = true },
}

func (h *harness) start(t *testing.T, d *datadriven.TestData) {
	instances := machinetest.Arg(t, d, "instances", []string{"pgdog-1", "pgdog-2", "pgdog-3"})
	designated := machinetest.Arg(t, d, "designated", instances[0])
	opts := cutover.Options{LagThreshold: 1000, PollEvery: 1000, CatchUpDeadline: 10_000, RetryAfter: 100, Attempts: 2, Grace: 5000}
	opts.FinalizeAfter = machinetest.Arg(t, d, "finalize-after", opts.FinalizeAfter)
	if d.HasArg("mutant") {
		h.mutant = true
		for _, mu := range strings.Split(machinetest.Arg(t, d, "mutant", ""), ",") { // mutant=a,b
			set, ok := scriptMutants[mu]
			if !ok {
				t.Fatalf("unknown mutant %q", mu)
			}
			set(&opts.Mutants)
		}
	}
	rec := fixture()
	if d.HasArg("phase") {
		rec.State.Phase = 1 // serving: an invalid start
		rec.Target = nil
		rec.State.To = 0
	}
	if d.HasArg("db") {
		rec.Router.Name = machinetest.Arg(t, d, "db", rec.Router.Name) // an invalid start
	}
	h.m = cutover.New()
	h.seen = nil
	// first-task=N: the id the designated PgDog hands out first (a freshly started one: 0).
	h.w = newWorld(fixture(), instances, designated, int64(machinetest.Arg(t, d, "first-task", 7)))
	// other-copy: another database's copy starts on d right after this one's (world.otherEarly).
	h.w.otherDB = d.HasArg("other-copy")
	h.w.otherEarly = h.w.otherDB
	h.rec = &machine.Recorder{}
	h.now = 1000
	h.rng = rand.New(rand.NewPCG(1, 2))
	h.timers = machinetest.Timers{}
	h.pending = nil
	h.answers = nil
	h.landing = nil
	pub := machinetest.Arg(t, d, "publication", "app_pub")
	h.step("start", cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: designated, Instances: instances, Role: "app", Publication: pub, Options: opts,
	}})
}

// deliver answers the commands in flight whose step matches match (all by default), in
// the order they were issued; count= answers only that many of them, and those matching
// hold= stay in flight. fail= makes
// matching ones fail with err=; applied= makes a failing one take effect anyway;
// swap-fail= makes a Cutover swap routing and then fail; lands-late= makes a failing
// Cutover that did not take effect arrive later all the same (see land).
func (h *harness) deliver(t *testing.T, d *datadriven.TestData) {
	match, hold, fail := machinetest.Arg(t, d, "match", "*"), machinetest.Arg(t, d, "hold", ""), machinetest.Arg(t, d, "fail", "")
	applied, swapFail, msg := machinetest.Arg(t, d, "applied", ""), machinetest.Arg(t, d, "swap-fail", ""), machinetest.Arg(t, d, "err", "unreachable")
	lands := machinetest.Arg(t, d, "lands-late", "")
	count := machinetest.Arg(t, d, "count", -1)
	batch := h.pending
	h.pending = nil
	for _, c := range batch {
		step := stepOf(c)
		if !glob(match, step) || hold != "" && glob(hold, step) || count == 0 {
			h.pending = append(h.pending, c)
			continue
		}
		count--
		var err error
		header := "ok " + step
		in := cutover.Input(nil)
		switch {
		case swapFail != "" && glob(swapFail, step):
			h.w.swapAndFail(c.(cutover.Cutover))
			err = errors.New(msg)
			in = cutover.Reply{Step: step, Err: err}
			header = "swap-fail " + step + ": " + msg
		case fail != "" && glob(fail, step):
			err = errors.New(msg)
			header = "fail " + step + ": " + msg
			if applied != "" && glob(applied, step) {
				header += " (applied)"
			} else if cut, ok := c.(cutover.Cutover); ok && lands != "" && glob(lands, step) {
				h.landing = append(h.landing, cut)
				header += " (its request still on its way)"
			}
		}
		if in == nil {
			in = h.w.apply(c, err, applied != "" && glob(applied, step))
		}
		h.answers = append(h.answers, in)
		h.step(header, in)
	}
}

// late feeds again the last answer delivered whose step matches match=: the late or
// repeated answer of an earlier attempt (a timed-out call whose reply turns up, a
// transport that delivers twice). The world does not change.
func (h *harness) late(t *testing.T, d *datadriven.TestData) {
	var match string
	d.ScanArgs(t, "match", &match)
	for i := len(h.answers) - 1; i >= 0; i-- {
		if step := inputStep(h.answers[i]); glob(match, step) {
			h.step("late "+step, h.answers[i])
			return
		}
	}
	t.Fatalf("%s: no answer delivered matches %q", d.Pos, match)
}

// land makes the first CUTOVER answered with lands-late= whose step matches match= arrive
// now: it takes effect if the task still waits for it, and its answer goes nowhere.
func (h *harness) land(t *testing.T, d *datadriven.TestData) {
	var match string
	d.ScanArgs(t, "match", &match)
	for i, c := range h.landing {
		if glob(match, c.Step) {
			h.landing = slices.Delete(h.landing, i, i+1)
			h.w.landLate(c)
			fmt.Fprintf(&h.out, "> %s lands late\n", c.Step)
			h.flushViolations()
			return
		}
	}
	t.Fatalf("%s: no CUTOVER on its way matches %q", d.Pos, match)
}

// stabilize answers everything in flight and fires every timer (moving the clock to
// it) until nothing is in flight and no timer is set, or the cutover is done. Commands
// whose step matches fail= keep failing, those matching hold= stay in flight; rounds=
// bounds the loop (default 50).
func (h *harness) stabilize(t *testing.T, d *datadriven.TestData) {
	hold := machinetest.Arg(t, d, "hold", "")
	for range machinetest.Arg(t, d, "rounds", 50) {
		if _, done := h.m.Done(); done {
			return
		}
		if slices.ContainsFunc(h.pending, func(c cutover.Command) bool { return hold == "" || !glob(hold, stepOf(c)) }) {
			h.deliver(t, d)
			continue
		}
		at, ok := h.timers.Next()
		if !ok {
			return
		}
		h.now = max(h.now, at)
		h.fireDue()
	}
}

// conflict makes a pending WriteRecord lose its compare-and-set. kind=own: its first try
// landed and the answer was lost; rebase: someone rewrote the record without changing it;
// other: someone moved the record to another generation.
func (h *harness) conflict(t *testing.T, d *datadriven.TestData) {
	var kind string
	d.ScanArgs(t, "kind", &kind)
	for i, c := range h.pending {
		wr, ok := c.(cutover.WriteRecord)
		if !ok {
			continue
		}
		h.pending = slices.Delete(h.pending, i, i+1)
		switch kind {
		case "own":
			h.w.apply(wr, nil, false)
		case "rebase":
			h.w.store.Version++
		case "other":
			h.w.store.Version++
			h.w.store.Generation += 7
			h.w.foreign = true
		default:
			t.Fatalf("unknown conflict kind %q", kind)
		}
		h.step("conflict "+kind+" "+wr.Step, h.w.apply(wr, nil, false))
		return
	}
	t.Fatalf("%s: no WriteRecord in flight", d.Pos)
}

func (h *harness) fireDue() {
	for id, _, ok := h.timers.Pop(h.now); ok; id, _, ok = h.timers.Pop(h.now) {
		h.step("timer "+id, cutover.TimerFired{ID: id})
	}
}

// restart persists the snapshot as JSON, drops every command in flight and every timer
// (the driver died), restores, and feeds Restarted. apply= lets matching commands in
// flight take effect first (they ran; their answers were lost).
func (h *harness) restart(t *testing.T, d *datadriven.TestData) {
	apply := machinetest.Arg(t, d, "apply", "")
	for _, c := range h.pending {
		if apply != "" && glob(apply, stepOf(c)) {
			h.w.ranUnanswered(c)
		}
	}
	h.w.crash()
	h.pending = nil
	h.timers = machinetest.Timers{}
	h.Restore(t)
	if machinetest.Arg(t, d, "legacy", false) {
		// The snapshot as a version without finalize's reload of d saved it.
		b, err := json.Marshal(h.m.Snapshot())
		require.NoError(t, err)
		var raw map[string]any
		require.NoError(t, json.Unmarshal(b, &raw))
		delete(raw, "FinalReloaded")
		b, err = json.Marshal(raw)
		require.NoError(t, err)
		var snap cutover.Snapshot
		require.NoError(t, json.Unmarshal(b, &snap))
		h.m, err = cutover.Restore(snap)
		require.NoError(t, err)
	}
	h.step("restart", cutover.Restarted{})
}

func (h *harness) printWorld() {
	w := h.w
	fmt.Fprintf(&h.out, "store gen=%d version=%d phase=%v files=%d\n", w.store.Generation, w.store.Version, w.store.State.Phase, w.files)
	for _, i := range w.instances {
		fmt.Fprintf(&h.out, "%s routes=%s paused=%v\n", i, w.routes[i], w.paused[i])
	}
	var fenced []string
	for _, s := range append(slices.Clone(w.src), w.dst...) {
		if w.fenced[s] {
			fenced = append(fenced, s)
		}
	}
	fmt.Fprintf(&h.out, "fenced=%v cut=%v rcut=%v lag=%d\n", fenced, w.cut, w.rcut, w.lag)
	var ids []int64
	for id := range w.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&h.out, "task %s %v\n", strconv.FormatInt(id, 10), w.tasks[id])
	}
}

// glob matches s against a pattern where * stands for any run of characters.
func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, p := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(s, p)
		}
		j := strings.Index(s, p)
		if j < 0 {
			return false
		}
		s = s[j+len(p):]
	}
	return true
}

// runScript runs directives through a fresh harness as a script would (each line a command
// and its arguments, no input), for tests that assert on the world rather than on the
// output. Without a mutant a violation fails t, as in a script.
func runScript(t *testing.T, lines ...string) *harness {
	t.Helper()
	h := &harness{}
	for i, l := range lines {
		cmd, args, err := datadriven.ParseLine(l)
		require.NoError(t, err, l)
		h.Handle(t, &datadriven.TestData{Pos: "line " + strconv.Itoa(i+1), Cmd: cmd, CmdArgs: args})
	}
	return h
}
