package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pfEvent is one PrimaryFailover SpecEvent as the trace module reads it
// (spec/trace/PrimaryFailoverTrace.qnt).
type pfEvent struct {
	Action, Router, Kind, Outcome string
	Gen, Attempt                  int
	OK                            bool
}

func (e pfEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, router: %q, gen: %d, attempt: %d, ok: %t, kind: %q, outcome: %q }`,
		e.Action, e.Router, e.Gen, e.Attempt, e.OK, e.Kind, e.Outcome)
}

// num reads a numeric field of a decoded event (0 when absent).
func num(m map[string]any, key string) int {
	f, _ := m[key].(float64)
	return int(f)
}

// failoverEvents reads the PrimaryFailover events of a trace; a Repoint's kind is read from
// ok, retry and err (machine/failover's onRecord).
func failoverEvents(events []map[string]any) []pfEvent {
	var out []pfEvent
	for _, m := range events {
		e := pfEvent{Action: m["action"].(string), Gen: num(m, "gen"), Attempt: num(m, "attempt")}
		e.Router, _ = m["router"].(string)
		e.Outcome, _ = m["outcome"].(string)
		e.OK, _ = m["ok"].(bool)
		if e.Action == "Repoint" {
			errText, _ := m["err"].(string)
			retry, _ := m["retry"].(bool)
			switch {
			case e.OK && retry:
				e.Kind = "same"
			case e.OK:
				e.Kind = "won"
			case strings.HasPrefix(errText, "conflict:"):
				e.Kind = "conflict"
			case strings.Contains(errText, "no longer in the record"):
				e.Kind = "gone"
			default:
				e.Kind = "error"
			}
		}
		out = append(out, e)
	}
	return out
}

// failoverTrace is the PrimaryFailover events of detsim's failover scenario at seed, and
// the fence attempts the seed drew (the machine's Options.Attempts) as the module's constant.
func failoverTrace(t *testing.T, seed uint64) ([]pfEvent, []string) {
	t.Helper()
	events, params := specEvents(t, "failover", seed, "PrimaryFailover")
	require.Contains(t, params, "attempts", "seed %d", seed)
	return failoverEvents(events), []string{fmt.Sprintf("FenceAttempts = %d", params["attempts"])}
}

// TestTraceValidationFailover: the PrimaryFailover events of detsim's failover scenario, for
// SPEC_TRACE_SEEDS fresh seeds (default 4, both engines; the scenario has no corpus seed),
// are steps the model allows.
func TestTraceValidationFailover(t *testing.T) {
	requireExplained(t, "PrimaryFailoverTrace", traceSeeds(t, "failover", 3, 4), failoverTrace)
}

// TestTraceValidationFailoverRejects: a failover trace with one event changed (the record
// written at a generation the record does not lead to), or one moved earlier (the repoint
// before the fence), is rejected at the index of that event, and the unchanged trace passes.
func TestTraceValidationFailoverRejects(t *testing.T) {
	events, consts := failoverTrace(t, 5)
	repoint := indexOf(t, events, "won Repoint", func(e pfEvent) bool { return e.Action == "Repoint" && e.Kind == "won" })
	fence := indexOf(t, events, "Fence", func(e pfEvent) bool { return e.Action == "Fence" })
	changed := append([]pfEvent(nil), events...)
	changed[repoint].Gen++
	moved := moveEarlier(events, repoint, fence)
	got := validateTraces(t, "PrimaryFailoverTrace", traceRun[pfEvent]{"unchanged", events, consts},
		traceRun[pfEvent]{"changed", changed, consts}, traceRun[pfEvent]{"moved", moved, consts})
	require.Equal(t, []int{len(events), repoint, fence}, got,
		"want the unchanged trace explained, the changed one stopped at its Repoint %d, the one with the Repoint moved before the fence at %d", repoint, fence)
}
