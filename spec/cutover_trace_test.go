package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/cutover"
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

// cutoverEvents reads the Cutover events of a trace and folds each run of one
// action (the machine's per-instance and per-shard commands, with their retries) into one
// event: OK when every target's last answer succeeded, DFail when the designated instance's
// did not, OFail when another instance's did not.
func cutoverEvents(events []map[string]any) []cutEvent {
	var out []cutEvent
	designated := ""
	for _, m := range events {
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
			case strings.Contains(errText, "no logical replication slot"):
				e.Pick = "gone" // the drain found no slot: CUTOVER was not sent
			case strings.Contains(errText, cutover.ErrNotSent.Error()):
				// The drain failed otherwise (timed out, or a call of it was lost): CUTOVER
				// was not sent either, so nothing of it can land late.
				e.Pick = "failed"
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
	events, _ := specEvents(t, "cutover", seed, "Cutover")
	return cutoverEvents(events)
}

// TestTraceValidationCutover: the Cutover events of detsim's cutover scenario, for three
// corpus seeds (a rollback, a lost CUTOVER answer, a finalize with restarts; every one with
// SPEC_TRACE_CORPUS=all) and SPEC_TRACE_SEEDS fresh ones (default 1), are steps the model
// allows.
func TestTraceValidationCutover(t *testing.T) {
	requireExplained(t, "CutoverTrace", traceSeeds(t, "cutover", 3, 1), noConsts(cutoverTrace))
}

// TestTraceValidationCutoverRejects: a cutover trace with one event changed, or one moved
// earlier, is rejected at the index of that event, and the unchanged trace passes.
func TestTraceValidationCutoverRejects(t *testing.T) {
	seed := seedWhere(t, "cutover", "Cutover", 4, "a finalize", func(evs []map[string]any) bool {
		return slices.ContainsFunc(evs, func(m map[string]any) bool { return m["action"] == "Finalize" })
	})
	events := cutoverTrace(t, seed) // a forward cutover that finalizes
	find := func(action string) int {
		return indexOf(t, events, action, func(e cutEvent) bool { return e.Action == action })
	}
	changed := append([]cutEvent(nil), events...)
	fin := find("Finalize")
	changed[fin].Action = "Publish" // a second publish where the cutover finalizes
	fence := find("Fence")
	moved := moveEarlier(events, find("Publish"), fence) // Publish before the fence
	got := validateTraces(t, "CutoverTrace", traceRun[cutEvent]{"unchanged", events, nil},
		traceRun[cutEvent]{"changed", changed, nil}, traceRun[cutEvent]{"moved", moved, nil})
	require.Equal(t, []int{len(events), fin, fence}, got,
		"want the unchanged trace explained, the changed one stopped at its event %d, the one with Publish moved before the fence at %d", fin, fence)
}

// TestCutoverPickFromErr: a Cutover's failed answer is read as the model's pick from what
// the executor says. A drain that failed, even on a lost call of its own ("may have
// applied"), kept CUTOVER from being sent, so it is "failed", never "lost" (a lost CUTOVER
// may land late; this one cannot); a drain that found no slot is "gone".
func TestCutoverPickFromErr(t *testing.T) {
	pick := func(ok bool, err string) string {
		evs := cutoverEvents([]map[string]any{{"action": "Cutover", "instance": "d", "ok": ok, "err": err}})
		require.Len(t, evs, 1)
		return evs[0].Pick
	}
	notSent := func(err string) string {
		return fmt.Errorf("draining slot \"s\" on shard s1 before CUTOVER: %w: %s", cutover.ErrNotSent, err).Error()
	}
	require.Equal(t, "took", pick(true, ""))
	require.Equal(t, "lost", pick(false, "detsim: call ctl→pgdog-0: timeout (the request may have applied)"))
	require.Equal(t, "failed", pick(false, notSent("detsim: call ctl→shard-1: timeout (the request may have applied)")))
	require.Equal(t, "failed", pick(false, notSent(`slot "s" on shard s1 not drained after 30000 ms`)))
	require.Equal(t, "gone", pick(false, notSent(`no logical replication slot of "s" on shard s1`)))
	require.Equal(t, "swapfailed", pick(false, "saving the config failed after the swap"))
	require.Equal(t, "failed", pick(false, "task is not a replication task"))
}
