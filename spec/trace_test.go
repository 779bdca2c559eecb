package spec

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
	"loam.dev/router/detsim/simtest"
)

// Trace validation (§11.3 of seed 000), the part every model shares: a detsim scenario runs
// at a seed with its trace written (RunOptions.TraceTo, -simtrace's JSON lines), the events
// of one spec are decoded, each model's test turns them into the Ev records of its trace
// module (spec/trace/<Model>Trace.qnt), and one simulator run of that module over the trace
// says how many events the model explains. Each trace module declares `const Trace:
// List[Ev]` (or, for events packed into integers, `const Packed: List[int]` and `const
// Names: List[str]`: see packedEvent) and `var idx: int`, starts with traceInit, steps with
// traceStep, and names Explained = idx < the trace's length: a sample that violates it
// consumed the whole trace.

// quintEvent is one event as its trace module's Ev record (Quint source).
type quintEvent interface{ quint() string }

// packedEvent is an event its trace module reads packed into one integer: such a module
// declares `const Packed: List[int]` and `const Names: List[str]` instead of Trace and
// decodes each event itself. Quint's type checker takes some 50 ms of CPU a record literal
// of the generated module and under 10 ms an integer one (measured here: 700 records 35 s,
// 700 integers of 30 digits 6 s), which is what lets a whole trace be validated. pack
// appends each of the event's string fields to names (first seen, first numbered) and
// returns the event's integer.
type packedEvent interface {
	quintEvent
	pack(names *[]string) (*big.Int, error)
}

// packer builds one packedEvent's integer, field by field: a string as its index in
// names (below packNames), an integer in [0, packInts), a bool as 0 or 1. The trace module
// decodes them in reverse order.
type packer struct {
	n     big.Int
	names *[]string
	err   error
}

const (
	packNames = 1000
	packInts  = 1_000_000_000_000_000 // 10^15
)

func (p *packer) field(v, base int64, what string) {
	if v < 0 || v >= base {
		p.err = errors.Join(p.err, fmt.Errorf("%s = %d is outside [0, %d)", what, v, base))
	}
	p.n.Mul(&p.n, big.NewInt(base))
	p.n.Add(&p.n, big.NewInt(v))
}

func (p *packer) str(s, what string) {
	i := slices.Index(*p.names, s)
	if i < 0 {
		i = len(*p.names)
		*p.names = append(*p.names, s)
	}
	p.field(int64(i), packNames, what)
}

func (p *packer) int(v int, what string) { p.field(int64(v), packInts, what) }

func (p *packer) bool(b bool) {
	v := int64(0)
	if b {
		v = 1
	}
	p.field(v, 2, "bool")
}

// specEvents runs detsim's scenario at seed and returns the events of spec in its trace, each
// as its decoded JSON object, and the scenario's parameters the seed drew (the machine's
// options among them, which some trace modules take as constants). The run must pass: a
// violation is the scenario's failure, not the model's.
func specEvents(t *testing.T, name string, seed uint64, spec string) ([]map[string]any, map[string]int) {
	t.Helper()
	sc, ok := scenario.ByName(name)
	require.True(t, ok, "no scenario %q", name)
	var buf bytes.Buffer
	r := sc.Run(seed, detsim.RunOptions{TraceTo: &buf})
	require.Nil(t, r.Violation, "%s seed %d", name, seed)
	var out []map[string]any
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "trace line %q", line)
		if m["spec"] == spec {
			out = append(out, m)
		}
	}
	params := map[string]int{}
	for _, p := range r.Options.Params {
		params[p.Name] = p.Value
	}
	return out, params
}

// seedWhere is the first seed from `from` (within 300) whose run of scenario name has spec
// events that want accepts. The scenarios' runs change whenever their fault points or
// parameters do, so a test that needs a kind of run (a finalize, a copy that lags) searches
// for one rather than pinning a seed that may stop being one.
func seedWhere(t *testing.T, name, spec string, from uint64, what string, want func([]map[string]any) bool) uint64 {
	t.Helper()
	for seed := from; seed < from+300; seed++ {
		if events, _ := specEvents(t, name, seed, spec); want(events) {
			return seed
		}
	}
	t.Fatalf("no %s run with %s in seeds %d..%d", name, what, from, from+299)
	return 0
}

// validateTrace runs the trace module spec/trace/<module>.qnt over events (with consts, such
// as "Attempts = 2", for the module's other constants) and returns how
// many of them the model explains: len(events) when a sample consumed the whole trace, else
// the highest idx its samples reached, the index of the first event the model cannot explain.
// (One run per trace: one run over several traces, each sample picking one, would save
// Quint's start-up, but the ITF traces the simulator writes are not every sample's, so a
// trace's best idx could not be read.)
func validateTrace[E quintEvent](t *testing.T, module string, events []E, consts ...string) int {
	t.Helper()
	quint := quintPath(t)
	var evs, names []string
	_, packed := any(*new(E)).(packedEvent)
	for _, e := range events {
		if !packed {
			evs = append(evs, e.quint())
			continue
		}
		n, err := any(e).(packedEvent).pack(&names)
		require.NoError(t, err, "event %+v", e)
		evs = append(evs, n.String())
	}
	// Quint imports by a path relative to the importing file, so the generated module lives
	// beside the trace module for the run (spec/.gitignore ignores it).
	bind, strs := []string{"Trace = Events"}, ""
	if packed {
		quoted := make([]string, len(names))
		for i, s := range names {
			quoted[i] = strconv.Quote(s)
		}
		strs = "  pure val Strs = [" + strings.Join(quoted, ", ") + "]\n"
		bind = []string{"Packed = Events", "Names = Strs"}
	}
	src := fmt.Sprintf("module Check {\n  pure val Events = [\n    %s\n  ]\n%s  import %s(%s).* from \"./%s\"\n}\n",
		strings.Join(evs, ",\n    "), strs, module, strings.Join(append(bind, consts...), ", "), module)
	f, err := os.CreateTemp("trace", ".check-*.qnt")
	require.NoError(t, err)
	file := f.Name()
	t.Cleanup(func() { os.Remove(file) })
	_, err = f.WriteString(src)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	dir := t.TempDir()
	samples := strconv.Itoa(cmp.Or(traceSamples[module], 30))
	// --verbosity=1: the example execution a violation prints at the default verbosity is the
	// whole trace's states, and Node may cut piped stdout at exit, "[violation]" with it (a
	// ShardMap trace of 87 events did); the ITF files hold the runs anyway.
	cmd := exec.Command(quint, "run", file, "--backend=typescript", "--main=Check", "--seed=1", "--verbosity=1",
		"--init=traceInit", "--step=traceStep", "--invariant=Explained", "--max-samples="+samples,
		"--n-traces="+samples, "--out-itf="+filepath.Join(dir, "run_{seq}.itf.json"),
		"--max-steps="+strconv.Itoa(4*len(evs)+20))
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("[violation]")) {
		return len(evs) // Explained violated: a sample consumed every event
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
	return best
}

// traceSamples is how many samples a trace module's run takes where 30 will not do (a
// sample stops at the first event it cannot explain; a trace is explained once one reaches
// the end). CausalReadTrace's traceStep has one step enabled in every state: one sample
// decides. CrossShardCommitTrace's coordinator is left free, and a transaction whose branches
// leave one at a time under a dead coordinator is explained only by one restart that aborts
// one branch and a crash that keeps its log: at 30 samples, bank seed 1000001's two
// transactions went unexplained at 3 of the 14 Quint seeds tried (the module before and
// after its restart rounds), at 100 at none of 6 (measured 2026-12-07).
var traceSamples = map[string]int{"CausalReadTrace": 1, "CrossShardCommitTrace": 100}

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

// traceSeeds: the scenario's corpus seeds (at most corpusMax, every one with
// SPEC_TRACE_CORPUS=all) and SPEC_TRACE_SEEDS fresh ones (default fresh) from 1,000,000 on.
// Each trace is one Quint run (seconds to half a minute of CPU), hence the small defaults.
func traceSeeds(t *testing.T, name string, corpusMax, fresh int) []uint64 {
	t.Helper()
	corpus, err := simtest.Corpus()
	require.NoError(t, err)
	var seeds []uint64
	for _, e := range corpus {
		if e.Scenario == name {
			require.Empty(t, e.Schedule, "%s: a shrunk schedule is not replayed here", e.File)
			seeds = append(seeds, e.Seed)
		}
	}
	if os.Getenv("SPEC_TRACE_CORPUS") != "all" && len(seeds) > corpusMax {
		seeds = seeds[:corpusMax]
	}
	if v := os.Getenv("SPEC_TRACE_SEEDS"); v != "" {
		fresh, err = strconv.Atoi(v)
		require.NoError(t, err, "SPEC_TRACE_SEEDS=%q is not a number", v)
	}
	for i := range fresh {
		seeds = append(seeds, 1_000_000+uint64(i))
	}
	return seeds
}

// traceRun is one trace to validate: its events and the trace module's other constants.
type traceRun[E quintEvent] struct {
	name   string
	events []E
	consts []string
}

// validateTraces validates every run with module, GOMAXPROCS Quint runs at a time (parallel
// subtests of one group, which returns when they are done), and returns what validateTrace
// returned for each.
func validateTraces[E quintEvent](t *testing.T, module string, runs ...traceRun[E]) []int {
	t.Helper()
	got := make([]int, len(runs))
	t.Run("quint", func(t *testing.T) {
		for i, r := range runs {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				got[i] = validateTrace(t, module, r.events, r.consts...)
			})
		}
	})
	return got
}

// requireExplained validates the trace of every seed (decoded by trace, which also gives the
// trace module's constants for that run) with module and fails, per seed, at the first event
// the model cannot explain.
func requireExplained[E quintEvent](t *testing.T, module string, seeds []uint64, trace func(*testing.T, uint64) ([]E, []string)) {
	t.Helper()
	var runs []traceRun[E]
	total := 0
	for _, seed := range seeds {
		events, consts := trace(t, seed)
		require.NotEmpty(t, events, "seed %d", seed)
		runs = append(runs, traceRun[E]{fmt.Sprintf("seed-%d", seed), events, consts})
		total += len(events)
	}
	got := validateTraces(t, module, runs...)
	for i, r := range runs {
		assert.Equal(t, len(r.events), got[i], "%s: the model cannot explain event %d (%+v) of %d",
			r.name, got[i], r.events[min(got[i], len(r.events)-1)], len(r.events))
	}
	t.Logf("%s: %d traces validated (seeds %v), %d events", module, len(seeds), seeds, total)
}

// noConsts is trace for a trace module with no constant but Trace.
func noConsts[E any](trace func(*testing.T, uint64) []E) func(*testing.T, uint64) ([]E, []string) {
	return func(t *testing.T, seed uint64) ([]E, []string) { return trace(t, seed), nil }
}

// moveEarlier is events with the one at from moved to index to (< from).
func moveEarlier[E any](events []E, from, to int) []E {
	out := append([]E(nil), events[:to]...)
	out = append(out, events[from])
	out = append(out, events[to:from]...)
	return append(out, events[from+1:]...)
}

// indexOf is the index of the first event that match accepts; the test fails without one.
func indexOf[E any](t *testing.T, events []E, what string, match func(E) bool) int {
	t.Helper()
	for i, e := range events {
		if match(e) {
			return i
		}
	}
	t.Fatalf("the trace has no %s event", what)
	return -1
}
