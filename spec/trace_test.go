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

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// fmEvent is one FencingMigration SpecEvent as the trace module reads it.
type fmEvent struct {
	Action, Pod, Request string
	Version              int
	OK                   bool
}

func (e fmEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, pod: %q, version: %d, request: %q, ok: %t }`, e.Action, e.Pod, e.Version, e.Request, e.OK)
}

func version(s string) int {
	if i := strings.Index("OABC", s); i >= 0 && len(s) == 1 {
		return i
	}
	return -1 // "gone" or unknown: no model step explains it
}

// fencingTrace runs detsim's fencing scenario at seed and returns its FencingMigration
// events, decoded from the JSON-lines trace the simulator writes (-simtrace's format).
func fencingTrace(t *testing.T, seed uint64) []fmEvent {
	t.Helper()
	sc, ok := scenario.ByName("fencing")
	require.True(t, ok)
	var buf bytes.Buffer
	r := sc.Run(seed, detsim.RunOptions{TraceTo: &buf})
	require.Nil(t, r.Violation, "seed %d", seed)
	var out []fmEvent
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "trace line %q", line)
		if m["spec"] != "FencingMigration" {
			continue
		}
		e := fmEvent{Action: m["action"].(string)}
		e.Pod, _ = m["pod"].(string)
		e.OK, _ = m["ok"].(bool)
		e.Version = -1
		if v, ok := m["version"].(string); ok {
			e.Version = version(v)
		}
		if req, ok := m["request"].(string); ok {
			e.Request, _, _ = strings.Cut(req, " ")
			if _, v, ok := strings.Cut(req, " "); ok {
				e.Version = version(v)
			}
		}
		out = append(out, e)
	}
	return out
}

// validate runs the FencingMigration trace module over events and returns how many of them
// the model explains (len(events) when it explains the whole trace).
func validate(t *testing.T, events []fmEvent) int {
	t.Helper()
	var evs []string
	for _, e := range events {
		evs = append(evs, e.quint())
	}
	return validateTrace(t, "FencingMigrationTrace", evs)
}

// validateTrace runs the trace module spec/trace/<module>.qnt over evs (Quint records of its
// Ev type) and returns how many of them the model explains: len(evs) when a run consumed the
// whole trace, else the highest idx any run reached.
func validateTrace(t *testing.T, module string, evs []string) int {
	t.Helper()
	quint := quintPath(t)
	// Quint imports by a path relative to the importing file, so the generated module lives
	// beside the trace module for the run (spec/.gitignore ignores it).
	dir := t.TempDir()
	src := fmt.Sprintf("module Check {\n  pure val Events = [\n    %s\n  ]\n  import %s(Trace = Events).* from \"./%s\"\n}\n", strings.Join(evs, ",\n    "), module, module)
	f, err := os.CreateTemp("trace", ".check-*.qnt")
	require.NoError(t, err)
	file := f.Name()
	t.Cleanup(func() { os.Remove(file) })
	_, err = f.WriteString(src)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	itf := filepath.Join(dir, "run_{seq}.itf.json")
	cmd := exec.Command(quint, "run", file, "--backend=typescript", "--main=Check", "--seed=1",
		"--init=traceInit", "--step=traceStep", "--invariant=Explained", "--max-samples=30",
		"--n-traces=30", "--out-itf="+itf, "--max-steps="+strconv.Itoa(4*len(evs)+20))
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("[violation]")) {
		return len(evs) // Explained violated: a run consumed every event
	}
	require.Contains(t, string(out), "[ok]", "quint run failed:\n%s", out)
	best := 0
	runs, err := filepath.Glob(filepath.Join(dir, "run_*.itf.json"))
	require.NoError(t, err)
	require.NotEmpty(t, runs, "no ITF trace written:\n%s", out)
	for _, f := range runs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var tr struct {
			States []map[string]json.RawMessage `json:"states"`
		}
		require.NoError(t, json.Unmarshal(b, &tr))
		for _, st := range tr.States {
			var idx struct {
				Big string `json:"#bigint"`
			}
			var raw json.RawMessage
			for k, v := range st {
				if k == "idx" || strings.HasSuffix(k, "::idx") {
					raw = v
				}
			}
			require.NotNil(t, raw, "no idx in the ITF state %v", st)
			require.NoError(t, json.Unmarshal(raw, &idx))
			n, err := strconv.Atoi(idx.Big)
			require.NoError(t, err)
			best = max(best, n)
		}
	}
	return best
}

// TestTraceValidationFencing: the FencingMigration events of detsim's fencing scenario are
// steps the model allows, for SPEC_TRACE_SEEDS fresh seeds (default 3; the fencing scenario
// has no corpus seed).
func TestTraceValidationFencing(t *testing.T) {
	n := 3
	if v := os.Getenv("SPEC_TRACE_SEEDS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "SPEC_TRACE_SEEDS=%q is not a number", v)
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		events := fencingTrace(t, seed)
		require.NotEmpty(t, events)
		got := validate(t, events)
		require.Equal(t, len(events), got, "seed %d: the model cannot explain event %d (%+v)", seed, got, events[min(got, len(events)-1)])
	}
}

// TestTraceValidationRejects: a trace with one event changed, or one moved earlier, is
// rejected, at the index of the first event the model cannot explain.
func TestTraceValidationRejects(t *testing.T) {
	events := fencingTrace(t, 5)
	find := func(action string) int {
		for i, e := range events {
			if e.Action == action {
				return i
			}
		}
		t.Fatalf("seed 5 has no %s event", action)
		return -1
	}
	t.Run("changed", func(t *testing.T) {
		bad := append([]fmEvent(nil), events...)
		i := find("Allow")
		bad[i].Version = 2 // allow B while the fleet runs O
		require.Equal(t, i, validate(t, bad))
	})
	t.Run("moved-earlier", func(t *testing.T) {
		i := find("Drained")
		j := find("Backfill")
		bad := append([]fmEvent(nil), events[:j]...)
		bad = append(bad, events[i])
		bad = append(bad, events[j:i]...)
		bad = append(bad, events[i+1:]...)
		require.Equal(t, j, validate(t, bad))
	})
}
