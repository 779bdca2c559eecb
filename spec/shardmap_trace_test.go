package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// smEvent is one ShardMap SpecEvent as the trace module reads it
// (spec/trace/ShardMapTrace.qnt).
type smEvent struct {
	Action, Inst                                          string
	Gen, Attempt, Observed, Confirmed, Ahead, Unknown, St int
	OK, Known, FilesOK                                    bool
}

func (e smEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, gen: %d, inst: %q, attempt: %d, ok: %t, observed: %d, known: %t, confirmed: %d, ahead: %d, unknown: %d, stuck: %d, filesOk: %t }`,
		e.Action, e.Gen, e.Inst, e.Attempt, e.OK, e.Observed, e.Known, e.Confirmed, e.Ahead, e.Unknown, e.St, e.FilesOK)
}

// shardMapEvents reads the ShardMap events of a trace. A Push of the generation already
// pushed is configpush's repush (stuck instances of an ended push, or its files step that
// gave up, get a fresh budget), the model's too (spec/ShardMap.qnt's Push); one that adds
// instances, or a refresh (the same generation's files rotated: every instance added
// again), the model lacks, and the push scenario never sends: the test fails on one. A
// refused files write is the model's Timeout of the files step (see the trace module).
func shardMapEvents(t *testing.T, events []map[string]any) []smEvent {
	t.Helper()
	var out []smEvent
	pushed := -1
	for n, m := range events {
		e := smEvent{Action: m["action"].(string), Gen: num(m, "gen"), Attempt: num(m, "attempt"),
			Observed: num(m, "observed"), Confirmed: num(m, "confirmed"), Ahead: num(m, "ahead"),
			Unknown: num(m, "unknown"), St: num(m, "stuck")}
		e.OK, _ = m["ok"].(bool)
		e.Known, _ = m["known"].(bool)
		e.FilesOK, _ = m["files_ok"].(bool)
		e.Inst, _ = m["instance"].(string)
		if step, ok := m["step"].(string); ok {
			if _, id, found := strings.Cut(strings.TrimPrefix(step, fmt.Sprintf("g%d/", e.Gen)), "/"); found {
				e.Inst = id
			}
		}
		switch {
		case e.Action == "Push" && e.Gen == pushed:
			require.Zero(t, num(m, "added"), "event %d %v: a Push of generation %d again that adds instances (or a refresh), which the model lacks", n, m, e.Gen)
		case e.Action == "Push":
			pushed = e.Gen
		case e.Action == "WriteFiles" && !e.OK:
			e.Action = "Timeout"
		case e.Action == "GiveUp":
			e.Attempt = num(m, "attempts")
		}
		out = append(out, e)
	}
	return out
}

// shardMapTrace is the ShardMap events of detsim's push scenario at seed (see
// shardMapEvents), with the run's instances, MaxAttempts and highest generation as the
// module's constants.
func shardMapTrace(t *testing.T, seed uint64) ([]smEvent, []string) {
	t.Helper()
	events, params := specEvents(t, "push", seed, "ShardMap")
	out := shardMapEvents(t, events)
	var ids []string
	maxGen := 1
	for _, e := range out {
		if e.Inst != "" && !slices.Contains(ids, e.Inst) {
			ids = append(ids, e.Inst)
		}
		maxGen = max(maxGen, e.Gen)
	}
	require.LessOrEqual(t, len(ids), params["instances"], "seed %d: instances %v", seed, ids)
	for i := 0; len(ids) < params["instances"]; i++ {
		if id := fmt.Sprintf("pgdog-%d", i); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = strconv.Quote(id)
	}
	return out, []string{"PushInstances = Set(" + strings.Join(quoted, ", ") + ")",
		fmt.Sprintf("PushAttempts = %d", params["max_attempts"]), fmt.Sprintf("PushMaxGen = %d", maxGen+1)}
}

// TestTraceValidationShardMap: the ShardMap events of detsim's push scenario, re-pushes
// included, for its corpus seeds, SPEC_TRACE_SEEDS fresh ones (default 2) and
// shardMapLateSeed, are steps the model allows.
func TestTraceValidationShardMap(t *testing.T) {
	requireExplained(t, "ShardMapTrace", append(traceSeeds(t, "push", 3, 2), shardMapLateSeed), shardMapTrace)
}

// shardMapLateSeed is a push seed whose trace has a reload's and an observe's success taken
// in their backoff, after the deadline of an attempt passed (events 37 and 41): the model
// lacked that until its Step.late, and 4 of 300 fresh seeds have one.
const shardMapLateSeed = 1_000_094

// TestTraceValidationShardMapRejects: a push trace with one event changed (an observe
// reporting a generation the files never held; a Refuse turned into a re-push of the
// generation whose push ended with every instance confirmed, which the machine ignores), or
// one moved earlier (a reload before the files write it follows), is rejected at the index
// of that event, and the unchanged trace passes.
func TestTraceValidationShardMapRejects(t *testing.T) {
	events, consts := shardMapTrace(t, 1_000_001)
	observe := indexOf(t, events, "known Observe", func(e smEvent) bool { return e.Action == "Observe" && e.OK && e.Known })
	reload := indexOf(t, events, "Reload", func(e smEvent) bool { return e.Action == "Reload" })
	files := indexOf(t, events, "WriteFiles", func(e smEvent) bool { return e.Action == "WriteFiles" })
	refuse := indexOf(t, events, "Refuse after a push ended", func(e smEvent) bool { return e.Action == "Refuse" })
	require.Equal(t, "Done", events[refuse-1].Action, "the Refuse %d does not follow the end of a push", refuse)
	require.Zero(t, events[refuse-1].St, "the push before the Refuse %d ended with an instance stuck", refuse)
	changed := append([]smEvent(nil), events...)
	changed[observe].Observed += 5
	repushed := append([]smEvent(nil), events...)
	repushed[refuse] = smEvent{Action: "Push", Gen: events[refuse-1].Gen}
	moved := moveEarlier(events, reload, files)
	got := validateTraces(t, "ShardMapTrace", traceRun[smEvent]{"unchanged", events, consts},
		traceRun[smEvent]{"changed", changed, consts}, traceRun[smEvent]{"repushed", repushed, consts},
		traceRun[smEvent]{"moved", moved, consts})
	require.Equal(t, []int{len(events), observe, refuse, files}, got,
		"want the unchanged trace explained, the changed one stopped at its Observe %d, the one with a re-push of a confirmed push at %d, the one with a Reload moved before the files write at %d", observe, refuse, files)
}
