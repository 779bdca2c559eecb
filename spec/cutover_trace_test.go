package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
	"loam.dev/router/detsim/simtest"
)

// cutEvent is one Cutover event as the trace module reads it (spec/trace/CutoverTrace.qnt):
// a run of the machine's events of one action folded into one.
type cutEvent struct {
	Action           string
	OK, DFail, OFail bool
	Applied          bool
	Pick             string
	targets          map[string]bool // target -> its last answer ok (for folding)
	designated       string
}

func (e cutEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, ok: %t, dfail: %t, ofail: %t, applied: %t, pick: %q }`,
		e.Action, e.OK, e.DFail, e.OFail, e.Applied, e.Pick)
}

// notModelled are the Cutover actions the model leaves out (see its header): a daemon that
// restarts adopts its snapshot and sends every command again with its step id, which the
// model's state already holds, so they are stutter steps of the trace and are dropped.
var notModelled = map[string]bool{"Adopt": true, "Restart": true}

// cutoverEvents decodes the Cutover events of a JSON-lines trace and folds each run of one
// action (the machine's per-instance and per-shard commands, with their retries) into one
// event: OK when every target's last answer succeeded, DFail when the designated instance's
// did not, OFail when another instance's did not.
func cutoverEvents(t *testing.T, trace []byte) []cutEvent {
	t.Helper()
	var out []cutEvent
	designated := ""
	for _, line := range bytes.Split(trace, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "trace line %q", line)
		if m["spec"] != "Cutover" {
			continue
		}
		act := m["action"].(string)
		if notModelled[act] {
			continue
		}
		if d, ok := m["designated"].(string); ok && act == "Start" {
			designated = d
		}
		ok := true
		if v, has := m["ok"].(bool); has {
			ok = v
		}
		target, _ := m["instance"].(string)
		if sh, has := m["shard"].(string); has {
			target = "shard:" + sh
		}
		if n := len(out); n == 0 || out[n-1].Action != act {
			out = append(out, cutEvent{Action: act, targets: map[string]bool{}, designated: designated})
		}
		e := &out[len(out)-1]
		e.targets[target] = ok
		if act == "Resolve" {
			e.Applied, _ = m["applied"].(bool)
		}
		if act == "Cutover" {
			errText, _ := m["err"].(string)
			switch {
			case ok:
				e.Pick = "took"
			case strings.Contains(errText, "after the swap"):
				e.Pick = "swapfailed"
			case strings.Contains(errText, "may have applied"):
				e.Pick = "lost"
			default:
				e.Pick = "failed"
			}
		}
	}
	for i := range out {
		e := &out[i]
		e.OK = true
		for target, ok := range e.targets {
			e.OK = e.OK && ok
			if !ok && target == e.designated {
				e.DFail = true
			} else if !ok && !strings.HasPrefix(target, "shard:") && target != "" {
				e.OFail = true
			}
		}
	}
	return out
}

func cutoverTrace(t *testing.T, seed uint64) []cutEvent {
	t.Helper()
	sc, ok := scenario.ByName("cutover")
	require.True(t, ok)
	var buf bytes.Buffer
	r := sc.Run(seed, detsim.RunOptions{TraceTo: &buf})
	require.Nil(t, r.Violation, "seed %d", seed)
	return cutoverEvents(t, buf.Bytes())
}

// validateCutover runs the Cutover trace module over each trace (one simulator run each, up
// to 30 samples, stopping at the first that consumes the whole trace) and returns per trace
// how many of its events the model explains: len(trace) when a sample consumed all of it,
// else the highest idx its samples reached. (One run over every trace, each sample picking
// one, would save Quint's start-up, but the ITF traces the simulator writes are not every
// sample's, so a trace's best idx could not be read.)
func validateCutover(t *testing.T, traces ...[]cutEvent) []int {
	t.Helper()
	quint := quintPath(t)
	var got []int
	for _, tr := range traces {
		var evs []string
		for _, e := range tr {
			evs = append(evs, e.quint())
		}
		src := fmt.Sprintf("module Check {\n  pure val Lists = [[\n    %s\n  ]]\n  import CutoverTrace(Traces = Lists).* from \"./CutoverTrace\"\n}\n", strings.Join(evs, ",\n    "))
		f, err := os.CreateTemp("trace", ".check-*.qnt")
		require.NoError(t, err)
		file := f.Name()
		_, err = f.WriteString(src)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		dir := t.TempDir()
		cmd := exec.Command(quint, "run", file, "--backend=typescript", "--main=Check", "--seed=1",
			"--init=traceInit", "--step=traceStep", "--invariant=Explained", "--max-samples=30", "--n-traces=30",
			"--out-itf="+filepath.Join(dir, "run_{seq}.itf.json"), "--max-steps="+strconv.Itoa(4*len(tr)+20))
		out, _ := cmd.CombinedOutput()
		os.Remove(file)
		if bytes.Contains(out, []byte("[violation]")) {
			got = append(got, len(tr)) // Explained violated: a sample consumed every event
			continue
		}
		require.Contains(t, string(out), "[ok]", "quint run failed:\n%s", out)
		runs, err := filepath.Glob(filepath.Join(dir, "run_*.itf.json"))
		require.NoError(t, err)
		require.NotEmpty(t, runs, "no ITF trace written:\n%s", out)
		best := 0
		for _, f := range runs {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var itf struct {
				States []map[string]json.RawMessage `json:"states"`
			}
			require.NoError(t, json.Unmarshal(b, &itf))
			for _, st := range itf.States {
				best = max(best, itfInt(t, st, "idx"))
			}
		}
		got = append(got, best)
	}
	return got
}

// itfInt reads the integer state variable name (maybe module-qualified) of an ITF state.
func itfInt(t *testing.T, st map[string]json.RawMessage, name string) int {
	t.Helper()
	for key, v := range st {
		if key == name || strings.HasSuffix(key, "::"+name) {
			var x struct {
				Big string `json:"#bigint"`
			}
			require.NoError(t, json.Unmarshal(v, &x))
			n, err := strconv.Atoi(x.Big)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in the ITF state %v", name, st)
	return 0
}

// cutoverSeeds: the cutover seeds of the corpus (three, or every one with
// SPEC_TRACE_CORPUS=all), and SPEC_TRACE_SEEDS fresh ones (default 1) from 1,000,000 on.
func cutoverSeeds(t *testing.T) []uint64 {
	t.Helper()
	corpus, err := simtest.Corpus()
	require.NoError(t, err)
	var seeds []uint64
	for _, e := range corpus {
		if e.Scenario == "cutover" {
			require.Empty(t, e.Schedule, "%s: a shrunk schedule is not replayed here", e.File)
			seeds = append(seeds, e.Seed)
		}
	}
	require.NotEmpty(t, seeds, "the corpus has no cutover seed")
	if os.Getenv("SPEC_TRACE_CORPUS") != "all" && len(seeds) > 3 {
		// Each trace is one Quint run (~30 s of CPU): the default checks three corpus seeds
		// (a rollback, a lost CUTOVER answer, a finalize with restarts); SPEC_TRACE_CORPUS=all
		// checks every one.
		seeds = seeds[:3]
	}
	n := 1
	if v := os.Getenv("SPEC_TRACE_SEEDS"); v != "" {
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "SPEC_TRACE_SEEDS=%q is not a number", v)
	}
	for i := range n {
		seeds = append(seeds, 1_000_000+uint64(i))
	}
	return seeds
}

// TestTraceValidationCutover: the Cutover events of detsim's cutover scenario, for corpus
// seeds (every one with SPEC_TRACE_CORPUS=all) and SPEC_TRACE_SEEDS fresh ones, are steps the
// model allows.
func TestTraceValidationCutover(t *testing.T) {
	seeds := cutoverSeeds(t)
	var traces [][]cutEvent
	for _, seed := range seeds {
		events := cutoverTrace(t, seed)
		require.NotEmpty(t, events, "seed %d", seed)
		traces = append(traces, events)
	}
	got := validateCutover(t, traces...)
	for i, seed := range seeds {
		events := traces[i]
		assert.Equal(t, len(events), got[i], "seed %d: the model cannot explain event %d (%+v) of %d",
			seed, got[i], events[min(got[i], len(events)-1)], len(events))
	}
	t.Logf("%d cutover traces validated (seeds %v)", len(seeds), seeds)
}

// TestTraceValidationCutoverRejects: a cutover trace with one event changed, or one moved
// earlier, is rejected at the index of that event (both checked in one run beside the
// unchanged trace, which must pass).
func TestTraceValidationCutoverRejects(t *testing.T) {
	events := cutoverTrace(t, 4) // a forward cutover that finalizes
	find := func(action string) int {
		for i, e := range events {
			if e.Action == action {
				return i
			}
		}
		t.Fatalf("seed 4 has no %s event", action)
		return -1
	}
	changed := append([]cutEvent(nil), events...)
	fin := find("Finalize")
	changed[fin].Action = "Publish" // a second publish where the cutover finalizes
	pub, fence := find("Publish"), find("Fence")
	moved := append([]cutEvent(nil), events[:fence]...)
	moved = append(moved, events[pub])
	moved = append(moved, events[fence:pub]...)
	moved = append(moved, events[pub+1:]...)
	got := validateCutover(t, events, changed, moved)
	require.Equal(t, []int{len(events), fin, fence}, got,
		"want the unchanged trace explained, the changed one stopped at its event %d, the one with Publish moved before the fence at %d", fin, fence)
}
