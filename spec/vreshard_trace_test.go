package spec

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// vrEvent is one VitessReshard SpecEvent as the trace module reads it
// (spec/trace/VitessReshardTrace.qnt).
type vrEvent struct {
	Action, Stage, Layout, Target, Outcome string
	OK, Flag, Bad, Lag                     bool
	Gen                                    int
}

func (e vrEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, stage: %q, ok: %t, flag: %t, bad: %t, lag: %t, gen: %d, layout: %q, target: %q, outcome: %q }`,
		e.Action, e.Stage, e.OK, e.Flag, e.Bad, e.Lag, e.Gen, e.Layout, e.Target, e.Outcome)
}

// vreshardEvents reads the VitessReshard events of a trace: the stage each answer ran in
// (machine/vreshard's stage names, "unswitch-reads" the model's "unswitch"), the Layout and
// Target a Mirror reports as the model's sides (the Start's source shards are "src", its
// target shards "tgt"), generations counted from the record's at Start (the first
// Mirror's, less the one its write added), and a done Copy's lag_ms over the Start's
// max_lag_ms as its lag.
func vreshardEvents(t *testing.T, events []map[string]any) []vrEvent {
	t.Helper()
	var out []vrEvent
	var source, target string
	g0 := -1
	var maxLag int
	side := func(m map[string]any, key string) string {
		switch v, _ := m[key].(string); v {
		case "":
			return "none"
		case source:
			return "src"
		case target:
			return "tgt"
		default:
			return "other:" + v
		}
	}
	for _, m := range events {
		e := vrEvent{Action: m["action"].(string), Gen: num(m, "gen")}
		e.OK, _ = m["ok"].(bool)
		e.Outcome, _ = m["outcome"].(string)
		str := func(key string) string { s, _ := m[key].(string); return s }
		switch e.Action {
		case "Start":
			source, target = str("source"), str("target")
			maxLag = num(m, "max_lag_ms")
			require.Positive(t, maxLag, "the Start event carries no max_lag_ms: %v", m)
		case "Inspect":
			e.Stage, e.Bad = "inspect", num(m, "problems") > 0
		case "Mirror":
			e.Layout, e.Target = side(m, "layout"), side(m, "target")
			if g0 < 0 {
				g0 = e.Gen
				if wrote, _ := m["wrote"].(bool); wrote {
					g0--
				}
			}
		case "Copy":
			e.Stage, e.Bad = "copy", str("failed") != ""
			e.Flag, _ = m["copying"].(bool)
			e.Lag = !e.Flag && !e.Bad && num(m, "lag_ms") > maxLag
		case "VDiff":
			e.Stage, e.Bad = "vdiff", str("mismatch") != ""
			e.Flag, _ = m["done"].(bool)
		case "Create", "Verify", "Complete":
			e.Stage = map[string]string{"Create": "create", "Verify": "verify", "Complete": "complete"}[e.Action]
		case "Cancel":
			e.Flag, _ = m["asked"].(bool)
			if !e.Flag {
				e.Stage = "cancel"
			}
		case "Switch":
			reverse, _ := m["reverse"].(bool)
			e.Stage = map[[2]bool]string{{false, false}: "reads", {true, false}: "writes",
				{false, true}: "unswitch", {true, true}: "reverse"}[[2]bool{str("types") == "primary" || len(str("types")) > len("replica,rdonly"), reverse}]
		case "Retry":
			e.Stage = str("step")
			if e.Stage == "unswitch-reads" {
				e.Stage = "unswitch"
			}
		}
		out = append(out, e)
	}
	require.GreaterOrEqual(t, g0, 0, "no Mirror in the trace")
	for i := range out {
		if out[i].Action == "Mirror" || out[i].Action == "Done" {
			out[i].Gen -= g0 - 1
		}
	}
	return out
}

// vreshardTrace is the VitessReshard events of detsim's vreshard scenario at seed.
func vreshardTrace(t *testing.T, seed uint64) []vrEvent {
	t.Helper()
	events, _ := specEvents(t, "vreshard", seed, "VitessReshard")
	return vreshardEvents(t, events)
}

// TestTraceValidationVReshard: the VitessReshard events of detsim's vreshard scenario, for
// SPEC_TRACE_SEEDS fresh seeds (default 4; the scenario has no corpus seed), are steps the
// model allows.
func TestTraceValidationVReshard(t *testing.T) {
	requireExplained(t, "VitessReshardTrace", traceSeeds(t, "vreshard", 3, 4), noConsts(vreshardTrace))
}

// TestTraceValidationVReshardRejects: a vreshard trace with one event changed (the Mirror
// after the writes switched reporting the source as the Layout), or one moved earlier (the switch of the
// writes before the VDiff), is rejected at the index of that event, and the unchanged trace
// passes.
func TestTraceValidationVReshardRejects(t *testing.T) {
	events := vreshardTrace(t, 1_000_000)
	writes := indexOf(t, events, "Switch of the writes", func(e vrEvent) bool { return e.Action == "Switch" && e.Stage == "writes" })
	mirror := writes + indexOf(t, events[writes:], "Mirror", func(e vrEvent) bool { return e.Action == "Mirror" })
	first := indexOf(t, events, "VDiff", func(e vrEvent) bool { return e.Action == "VDiff" })
	changed := append([]vrEvent(nil), events...)
	changed[mirror].Layout = "src"
	moved := moveEarlier(events, writes, first)
	got := validateTraces(t, "VitessReshardTrace", traceRun[vrEvent]{"unchanged", events, nil},
		traceRun[vrEvent]{"changed", changed, nil}, traceRun[vrEvent]{"moved", moved, nil})
	require.Equal(t, []int{len(events), mirror, first}, got,
		"want the unchanged trace explained, the changed one stopped at its Mirror %d, the one with the writes switched before the VDiff at %d", mirror, first)
}

// TestTraceValidationVReshardLagRejects: in a trace under heavy writes (the first seed from
// 1000000 whose copy ends lagging over MaxLagMs and is polled until the lag is at or under
// it), a lagging Copy reported as caught up is rejected at the Copy after it (the model has
// gone on to the VDiff), and the unchanged trace passes: the lag is read from the event, not
// guessed.
func TestTraceValidationVReshardLagRejects(t *testing.T) {
	seed := seedWhere(t, "vreshard", "VitessReshard", 1_000_000, "a lagging copy polled again", func(evs []map[string]any) bool {
		maxLag := -1
		for i, m := range evs {
			switch {
			case m["action"] == "Start":
				maxLag = num(m, "max_lag_ms")
			case m["action"] == "Copy" && m["copying"] == false && maxLag > 0 && num(m, "lag_ms") > maxLag:
				return slices.ContainsFunc(evs[i+1:], func(n map[string]any) bool { return n["action"] == "Copy" })
			}
		}
		return false
	})
	events := vreshardTrace(t, seed)
	lagging := indexOf(t, events, "lagging Copy", func(e vrEvent) bool { return e.Action == "Copy" && e.Lag })
	next := lagging + 1 + indexOf(t, events[lagging+1:], "Copy", func(e vrEvent) bool { return e.Action == "Copy" })
	changed := append([]vrEvent(nil), events...)
	changed[lagging].Lag = false
	got := validateTraces(t, "VitessReshardTrace", traceRun[vrEvent]{"unchanged", events, nil}, traceRun[vrEvent]{"caught-up", changed, nil})
	require.Equal(t, []int{len(events), next}, got,
		"want the unchanged trace explained and the one with Copy %d caught up stopped at the next Copy %d", lagging, next)
}
