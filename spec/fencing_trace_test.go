package spec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fmEvent is one FencingMigration SpecEvent as the trace module reads it
// (spec/trace/FencingMigrationTrace.qnt).
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

// fencingTrace is the FencingMigration events of detsim's fencing scenario at seed.
func fencingTrace(t *testing.T, seed uint64) []fmEvent {
	t.Helper()
	var out []fmEvent
	events, _ := specEvents(t, "fencing", seed, "FencingMigration")
	for _, m := range events {
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

// TestTraceValidationFencing: the FencingMigration events of detsim's fencing scenario are
// steps the model allows, for SPEC_TRACE_SEEDS fresh seeds (default 3; the fencing scenario
// has no corpus seed).
func TestTraceValidationFencing(t *testing.T) {
	requireExplained(t, "FencingMigrationTrace", traceSeeds(t, "fencing", 3, 3), noConsts(fencingTrace))
}

// TestTraceValidationRejects: a fencing trace with one event changed, or one moved earlier,
// is rejected, at the index of the first event the model cannot explain.
func TestTraceValidationRejects(t *testing.T) {
	events := fencingTrace(t, 5)
	find := func(action string) int {
		return indexOf(t, events, action, func(e fmEvent) bool { return e.Action == action })
	}
	changed := append([]fmEvent(nil), events...)
	allow := find("Allow")
	changed[allow].Version = 2 // allow B while the fleet runs O
	backfill := find("Backfill")
	moved := moveEarlier(events, find("Drained"), backfill) // drained before the backfill
	got := validateTraces(t, "FencingMigrationTrace", traceRun[fmEvent]{"changed", changed, nil},
		traceRun[fmEvent]{"moved", moved, nil})
	require.Equal(t, []int{allow, backfill}, got,
		"want the changed trace stopped at its Allow %d, the one with Drained moved before the backfill at %d", allow, backfill)
}
