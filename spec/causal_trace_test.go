package spec

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
)

// crEvent is one CausalRead SpecEvent as the trace module reads it
// (spec/trace/CausalReadTrace.qnt).
type crEvent struct {
	Action, F, EP, State, Src      string
	T, HG, N, Sent, LSN, After, DL int
	Known, Resolved                bool
}

func (e crEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, t: %d, f: %q, hg: %d, ep: %q, n: %d, sent: %d, known: %t, lsn: %d, state: %q, src: %q, after: %d, deadline: %d, resolved: %t }`,
		e.Action, e.T, e.F, e.HG, e.EP, e.N, e.Sent, e.Known, e.LSN, e.State, e.Src, e.After, e.DL, e.Resolved)
}

// pack is e as one integer (packedEvent): its fields in the order CausalReadTrace's decode
// takes them apart from the last.
func (e crEvent) pack(names *[]string) (*big.Int, error) {
	p := packer{names: names}
	for _, s := range []struct{ v, what string }{{e.Action, "act"}, {e.F, "f"}, {e.EP, "ep"}, {e.State, "state"}, {e.Src, "src"}} {
		p.str(s.v, s.what)
	}
	for _, f := range []struct {
		v    int
		what string
	}{{e.T, "t"}, {e.HG, "hg"}, {e.N, "n"}, {e.Sent, "sent"}, {e.LSN + 1, "lsn+1"}, {e.After, "after"}, {e.DL, "deadline"}} {
		p.int(f.v, f.what)
	}
	p.bool(e.Known)
	p.bool(e.Resolved)
	return &p.n, p.err
}

// crEP is the model's name of a causal-scenario endpoint: p for the primary, r<i> for
// pg-replica-<i>; "" (no model endpoint) for any other.
func crEP(s string) string {
	host, _, _ := strings.Cut(s, ":")
	if host == "pg-primary" {
		return "p"
	}
	if i, ok := strings.CutPrefix(host, "pg-replica-"); ok {
		return "r" + i
	}
	return ""
}

// crLSN is an event's lsn field as an integer, -1 for none ("": pending or unknown).
func crLSN(t *testing.T, m map[string]any) int {
	t.Helper()
	s, _ := m["lsn"].(string)
	if s == "" {
		return -1
	}
	l, err := lsn.Parse(s)
	require.NoError(t, err, "event %v", m)
	return int(l)
}

// causalEvents reads the CausalRead events of a causal trace. A request's events name it by
// id; the trace module by session, the one whose Require named the id. Records of the
// destination hostgroup (1: a read served by a replica, Executed after the route) are left
// out: the model keeps only each session's record for the source hostgroup (0, the primary),
// the one its causal reads name (every Require of the scenario is from hostgroup 0, which
// the test checks), and a record of another hostgroup changes no state the model has.
func causalEvents(t *testing.T, events []map[string]any) []crEvent {
	t.Helper()
	var out []crEvent
	byReq := map[int]string{}
	for n, m := range events {
		// Times are shifted by 1 ms: the model's clock starts at 1 (its lastSent 0 is "never
		// polled"), the scenario's at 0, where a first poll may be sent.
		e := crEvent{Action: m["action"].(string), T: num(m, "t") + 1, HG: num(m, "hg"), Sent: num(m, "sent") + 1,
			After: num(m, "after") + 1, DL: num(m, "deadline") + 1, LSN: crLSN(t, m)}
		e.Known, _ = m["known"].(bool)
		e.Resolved, _ = m["resolved"].(bool)
		e.State, _ = m["state"].(string)
		e.F, _ = m["frontend"].(string)
		if s, ok := m["ep"].(string); ok {
			e.EP = crEP(s)
		}
		if s, ok := m["src"].(string); ok && s != "" {
			e.Src = crEP(s)
		}
		req := num(m, "req")
		switch e.Action {
		case "Configure":
			e.N = num(m, "members")
		case "Route":
			e.N = num(m, "eligible")
			require.Equal(t, true, m["causal"], "event %d %v: an ordinary Acquire, which the model lacks", n, m)
			require.Equal(t, 1, e.HG, "event %d %v: a route of a hostgroup other than the destination", n, m)
		case "Record":
			if e.HG == 1 {
				continue
			}
		case "Require":
			require.Zero(t, num(m, "from"), "event %d %v: a causal read from a hostgroup other than the source", n, m)
			byReq[req] = e.F
		}
		if e.F == "" && req != 0 {
			e.F = byReq[req]
		}
		out = append(out, e)
	}
	return out
}

// causalTrace is the CausalRead events of detsim's causal scenario at seed (see
// causalEvents), with the run's sessions and replicas as the module's constants.
func causalTrace(t *testing.T, seed uint64) ([]crEvent, []string) {
	t.Helper()
	events, params := specEvents(t, "causal", seed, "CausalRead")
	var sessions, replicas []string
	for i := range params["sessions"] {
		sessions = append(sessions, strconv.Quote(fmt.Sprintf("session-%d", i+1)))
	}
	for i := range params["replicas"] {
		replicas = append(replicas, strconv.Quote(fmt.Sprintf("r%d", i+1)))
	}
	return causalEvents(t, events), []string{"TraceSessions = Set(" + strings.Join(sessions, ", ") + ")",
		"TraceReplicas = Set(" + strings.Join(replicas, ", ") + ")"}
}

// TestTraceValidationCausal: the CausalRead events of detsim's causal scenario, each trace
// whole (some 500-700 events, handed to the model packed: see packedEvent), are steps the
// model allows, for its corpus seeds and SPEC_TRACE_SEEDS fresh ones (default 1).
func TestTraceValidationCausal(t *testing.T) {
	requireExplained(t, "CausalReadTrace", traceSeeds(t, "causal", 3, 1), func(t *testing.T, seed uint64) ([]crEvent, []string) {
		return causalTrace(t, seed)
	})
}

// TestTraceValidationCausalRejects: a causal trace with one event changed (a Require naming
// a record completed 1 ms later than the session's, early in the trace or the last one) or
// one moved earlier (a Require with a record moved before the write it follows) is rejected
// at the index of that event, and the unchanged trace passes.
func TestTraceValidationCausalRejects(t *testing.T) {
	events, consts := causalTrace(t, 1)
	require := require.New(t)
	req := indexOf(t, events, "Require with a record", func(e crEvent) bool { return e.Action == "Require" && e.State != "none" })
	rec := -1
	for i := req - 1; i >= 0 && rec < 0; i-- {
		if events[i].Action == "Record" && events[i].F == events[req].F {
			rec = i
		}
	}
	require.GreaterOrEqual(rec, 0, "no Record before the Require %d", req)
	changed := append([]crEvent(nil), events...)
	changed[req].After++
	moved := moveEarlier(events, req, rec)
	// The last such Require, changed the same way: the whole trace is validated, not a
	// first window of it.
	last := len(events) - 1
	for last >= 0 && !(events[last].Action == "Require" && events[last].State != "none") {
		last--
	}
	require.Greater(last, 400, "the last Require with a record is early in the trace")
	late := append([]crEvent(nil), events...)
	late[last].After++
	got := validateTraces(t, "CausalReadTrace", traceRun[crEvent]{"unchanged", events, consts},
		traceRun[crEvent]{"changed", changed, consts}, traceRun[crEvent]{"moved", moved, consts},
		traceRun[crEvent]{"late", late, consts})
	require.Equal([]int{len(events), req, rec, last}, got,
		"want the unchanged trace explained, the changed one stopped at its Require %d, the one with the Require moved before its Record at %d, the late change at %d", req, rec, last)
}
