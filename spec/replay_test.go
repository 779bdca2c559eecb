package spec

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
)

// The shared part of issue 18's model-based replays (the machine side of each is in its
// <model>_replay_test.go): generate runs with the model's simulator, decode them, and hand
// each to a replay that returns the first disagreement as an error (so that a test can
// show a machine mutant making it fail).

// modelRun is one run the simulator generated, decoded into the replay's state type S.
type modelRun[S any] struct {
	Name   string
	States []S
}

// replayError is a disagreement between the model and the machine at one step of a run.
type replayError struct {
	Run    string
	Step   int
	Action string
	Msg    string
	Log    []string
}

func (e *replayError) Error() string {
	return fmt.Sprintf("%s step %d (%s): %s\nreplayed so far:\n%s", e.Run, e.Step, e.Action, e.Msg, strings.Join(e.Log, "\n"))
}

// replayer is what every replay keeps beside its machine: the recorder of the machine's
// SpecEvents, the seeded generator its jitter draws from, the log of the steps replayed so
// far (what a disagreement prints) and the step being replayed.
type replayer struct {
	run    string
	action func(step int) string
	tr     *machine.Recorder
	rng    *rand.Rand
	log    []string
	step   int
}

func newReplayer(run string, action func(step int) string) *replayer {
	return &replayer{run: run, action: action, tr: &machine.Recorder{}, rng: rand.New(rand.NewPCG(1, 2))}
}

// fail stops the replay with the disagreement at the step being replayed (recoverReplay
// turns it into the replay's error).
func (r *replayer) fail(format string, a ...any) {
	panic(&replayError{Run: r.run, Step: r.step, Action: r.action(r.step), Msg: fmt.Sprintf(format, a...), Log: r.log})
}

// recoverReplay, deferred by a replay, turns the *replayError its fail panicked with into
// the error it returns (any other panic goes on).
func recoverReplay(err *error) {
	if r := recover(); r != nil {
		e, ok := r.(*replayError)
		if !ok {
			panic(r)
		}
		*err = e
	}
}

// quintPath is the pinned quint binary; the test skips without it (fails with
// LOAM_REQUIRE_REAL=1, as CI sets).
func quintPath(t *testing.T) string {
	t.Helper()
	quint, err := filepath.Abs("node_modules/.bin/quint")
	require.NoError(t, err)
	if _, err := os.Stat(quint); err != nil {
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatalf("spec/node_modules is missing: run 'npm ci' in spec/ (LOAM_REQUIRE_REAL=1)")
		}
		t.Skip("skipped: needs quint (npm ci in spec/)")
	}
	return quint
}

// replayRuns is how many runs a replay generates: def, or SPEC_REPLAY_RUNS (nightly size).
func replayRuns(t *testing.T, def int) int {
	t.Helper()
	v := os.Getenv("SPEC_REPLAY_RUNS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "SPEC_REPLAY_RUNS=%q is not a number: set it to how many model runs to replay", v)
	return n
}

// modelRuns has the simulator generate runs of main in file (quint run --mbt at seed 1,
// `runs` distinct runs of at most `steps` steps, then flags) and decodes each state into S
// (see readITF). Quint 0.33.0 writes each sampled run twice (run_2k and run_2k+1, equal but
// for their timestamp), so it is asked for twice as many and the copies are dropped: before
// that, every replay ran half the distinct runs it said.
func modelRuns[S any](t *testing.T, file, main string, runs, steps int, flags ...string) []modelRun[S] {
	t.Helper()
	if dir := os.Getenv("SPEC_REPLAY_ITF"); dir != "" { // replay saved runs (run_*.itf.json) instead
		return distinctRuns(t, readRuns[S](t, dir))
	}
	quint := quintPath(t)
	dir := t.TempDir()
	n := strconv.Itoa(2 * runs)
	args := append([]string{"run", file, "--backend=typescript", "--main=" + main, "--seed=1",
		"--max-samples=" + n, "--n-traces=" + n, "--max-steps=" + strconv.Itoa(steps), "--mbt",
		"--out-itf=" + filepath.Join(dir, "run_{seq}.itf.json")}, flags...)
	cmd := exec.CommandContext(t.Context(), quint, args...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "quint run failed:\n%s", out)
	all := readRuns[S](t, dir)
	require.Len(t, all, 2*runs, "quint wrote %d ITF runs, not %d:\n%s", len(all), 2*runs, out)
	all = distinctRuns(t, all)
	return all[:min(runs, len(all))]
}

// distinctRuns drops the runs whose states equal an earlier run's, in file order.
func distinctRuns[S any](t *testing.T, all []modelRun[S]) []modelRun[S] {
	t.Helper()
	seen := map[string]bool{}
	var out []modelRun[S]
	for _, r := range all {
		b, err := json.Marshal(r.States)
		require.NoError(t, err)
		if !seen[string(b)] {
			seen[string(b)] = true
			out = append(out, r)
		}
	}
	return out
}

// readRuns decodes the runs dir holds (run_*.itf.json).
func readRuns[S any](t *testing.T, dir string) []modelRun[S] {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "run_*.itf.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no run_*.itf.json in %s", dir)
	var all []modelRun[S]
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		states, err := readITF[S](b)
		require.NoError(t, err, "%s", filepath.Base(f))
		all = append(all, modelRun[S]{Name: filepath.Base(f), States: states})
	}
	return all
}

// readITF decodes an ITF run of a model into S: integers come as {"#bigint": "n"}, sets as
// {"#set": [...]}, lists as arrays, records as objects, the nondet picks as {"tag":
// "Some"|"None", "value": v}. A state variable named "<module>::x" fills field X of S (JSON
// rules: case-insensitive), the action taken fills Action and the picks made (the Some ones)
// fill Picks, a map[string]any, when S has those fields.
func readITF[S any](b []byte) ([]S, error) {
	var itf struct {
		States []map[string]any `json:"states"`
	}
	if err := json.Unmarshal(b, &itf); err != nil {
		return nil, fmt.Errorf("ITF run: %w (quint --out-itf writes {\"states\": [...]})", err)
	}
	var out []S
	for i, st := range itf.States {
		plain := map[string]any{}
		for k, v := range st {
			plain[k[strings.LastIndex(k, ":")+1:]] = itfPlain(v)
		}
		picks := map[string]any{}
		if p, ok := plain["nondetPicks"].(map[string]any); ok {
			for k, v := range p {
				if o, ok := v.(map[string]any); ok && o["tag"] == "Some" {
					picks[k] = o["value"]
				}
			}
		}
		delete(plain, "nondetPicks")
		plain["Action"] = plain["actionTaken"]
		enc, err := json.Marshal(plain)
		if err != nil {
			return nil, fmt.Errorf("ITF state %d: %w", i, err)
		}
		var s S
		if err := json.Unmarshal(enc, &s); err != nil {
			return nil, fmt.Errorf("ITF state %d does not fit %T: %w (a model variable changed shape: update the replay's state type)", i, s, err)
		}
		// Set after decoding: through JSON an integer pick would become a float64.
		if f := reflect.ValueOf(&s).Elem().FieldByName("Picks"); f.IsValid() && f.Type() == reflect.TypeOf(picks) {
			f.Set(reflect.ValueOf(picks))
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ITF run has no states: the simulator wrote an empty run")
	}
	return out, nil
}

func itfPlain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if n, ok := x["#bigint"].(string); ok {
			i, _ := strconv.Atoi(n)
			return i
		}
		if set, ok := x["#set"]; ok {
			return itfPlain(set)
		}
		if m, ok := x["#map"].([]any); ok { // a Quint map: [[k, v], ...]; keys here are strings
			o := map[string]any{}
			for _, kv := range m {
				if p, ok := kv.([]any); ok && len(p) == 2 {
					o[fmt.Sprint(itfPlain(p[0]))] = itfPlain(p[1])
				}
			}
			return o
		}
		o := map[string]any{}
		for k, e := range x {
			o[k] = itfPlain(e)
		}
		return o
	case []any:
		o := make([]any, len(x))
		for i, e := range x {
			o[i] = itfPlain(e)
		}
		return o
	}
	return v
}

// stepOf is the Step (and Attempt, when the type has one) of a machine's command or
// answer: every machine's commands carry them as fields of those names.
func stepOf(c any) (string, int) {
	v := reflect.ValueOf(c)
	if !v.IsValid() || v.Kind() != reflect.Struct {
		return "", 0
	}
	step, at := "", 0
	if f := v.FieldByName("Step"); f.IsValid() && f.Kind() == reflect.String {
		step = f.String()
	}
	if f := v.FieldByName("Attempt"); f.IsValid() && f.CanInt() {
		at = int(f.Int())
	}
	return step, at
}

// firstReplayError is the first error replay returns over runs, nil if every run replays.
func firstReplayError[S any](runs []modelRun[S], replay func(modelRun[S]) error) error {
	for _, r := range runs {
		if err := replay(r); err != nil {
			return err
		}
	}
	return nil
}

// firstLine is err's first line (a replay error goes on with the steps replayed).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// actionsOf is the actions of events, in order.
func actionsOf(events []machine.SpecEvent) []string {
	var acts []string
	for _, e := range events {
		acts = append(acts, e.Action)
	}
	return acts
}

// sameActions reports whether a machine step emitted events with exactly the actions the
// model's step emitted, in order.
func sameActions(events []machine.SpecEvent, model []string) bool {
	return slices.Equal(actionsOf(events), model) || len(events)+len(model) == 0
}

// typeName is the command's type name without its package ("Inspect").
func typeName(c any) string {
	if c == nil {
		return "<none>"
	}
	return reflect.TypeOf(c).Name()
}
