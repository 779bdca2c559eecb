package spec

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// csEvent is one event of a CrossShardCommit trace projected onto one transaction, as the
// trace module reads it (spec/trace/CrossShardCommitTrace.qnt).
type csEvent struct {
	Action, Shard, Reason                  string
	OK, Seen, Alive                        bool
	Old1, Old2, Over1, Over2, Rest1, Rest2 bool
}

func (e csEvent) quint() string {
	return fmt.Sprintf(`{ act: %q, sh: %q, ok: %t, seen: %t, alive: %t, old1: %t, old2: %t, over1: %t, over2: %t, rest1: %t, rest2: %t, reason: %q }`,
		e.Action, e.Shard, e.OK, e.Seen, e.Alive, e.Old1, e.Old2, e.Over1, e.Over2, e.Rest1, e.Rest2, e.Reason)
}

// pack is e as one integer (packedEvent), in the order CrossShardCommitTrace's decode takes
// it apart from the last.
func (e csEvent) pack(names *[]string) (*big.Int, error) {
	p := packer{names: names}
	p.str(e.Action, "act")
	p.str(e.Shard, "sh")
	p.str(e.Reason, "reason")
	for _, b := range []bool{e.OK, e.Seen, e.Alive, e.Old1, e.Old2, e.Over1, e.Over2, e.Rest1, e.Rest2} {
		p.bool(b)
	}
	return &p.n, p.err
}

// csRound is one round of the monitor as its events show it.
type csRound struct {
	n      uint64
	scans  map[string]map[string]any // by shard
	roster map[string]any
	alerts []map[string]any // MonitorAlert and MonitorClear, in order
	close  int64            // when the round was judged: its last reply (or the timer that closed it)
	// abandoned: a MonitorRestart came while the round was open (its scans that arrived
	// before it are kept, its roster never came); the next round is the one it opened.
	abandoned bool
}

// csRounds groups the monitor's events by round, leaving out Track and Deliver. A round a
// MonitorRestart abandoned is kept, marked; a MonitorRestart between rounds is left out (it
// opens the next round at once, which the model's idle monitor does on its own). Alerts
// and clears belong to the round whose close emitted them.
func csRounds(t *testing.T, events []map[string]any, shards int) []*csRound {
	t.Helper()
	var out []*csRound
	var cur *csRound
	for _, m := range events {
		switch m["action"] {
		case indoubt.ActRound:
			if cur != nil && !cur.complete(shards) {
				t.Fatalf("round %d: round %d opened before it closed", cur.n, num(m, "round"))
			}
			cur = &csRound{n: uint64(num(m, "round")), scans: map[string]map[string]any{}}
			out = append(out, cur)
		case indoubt.ActScan:
			require.Equal(t, cur.n, uint64(num(m, "round")), "%v", m)
			cur.scans[m["shard"].(string)] = m
			cur.close = max(cur.close, int64(num(m, "t")))
		case indoubt.ActRoster:
			require.Equal(t, cur.n, uint64(num(m, "round")), "%v", m)
			cur.roster = m
			cur.close = max(cur.close, int64(num(m, "t")))
		case indoubt.ActAlert, indoubt.ActClear:
			require.True(t, cur.complete(shards), "an alert in round %d before it closed: %v", cur.n, m)
			cur.alerts = append(cur.alerts, m)
		case indoubt.ActRestart:
			if cur != nil && !cur.complete(shards) {
				cur.abandoned = true // its outstanding replies went with the old driver
			}
			cur = nil
		}
	}
	if cur != nil && !cur.complete(shards) {
		out = out[:len(out)-1] // still open at the end of the run
	}
	return out
}

func (r *csRound) complete(shards int) bool {
	return r != nil && len(r.scans) == shards && r.roster != nil
}

// csList splits an event's "a@n,b@m" field into a map (n parsed; "" for none).
func csList(t *testing.T, m map[string]any, key string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	s, _ := m[key].(string)
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "@")
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err, "%s in %v", key, m)
		out[k] = n
	}
	return out
}

// csTxn is one transaction: its name (the gid without the shard suffix) and coordinator.
type csTxn struct{ name, instance string }

// crossshardProject projects the monitor's rounds onto each transaction seen prepared (see
// spec/trace/CrossShardCommitTrace.qnt), keeping the rounds from the first that sees it to
// the first after which it is neither prepared nor alerted, whole (handed to the model
// packed: see packedEvent). threshold and stuckAfter are the monitor's, in ms.
func crossshardProject(t *testing.T, rounds []*csRound, shardNames []string, threshold, stuckAfter int64) map[csTxn][]csEvent {
	t.Helper()
	model := map[string]string{}
	for i, n := range shardNames {
		model[n] = "s" + strconv.Itoa(i+1)
	}
	// The per-round view: each shard's kept list (gid -> origin), the last good roster,
	// and the alerts (id -> reason and gids), after the round.
	type view struct {
		kept   map[string]map[string]int64
		procs  map[string]int64
		alerts map[string]struct {
			reason string
			gids   []string
		}
	}
	kept := map[string]map[string]int64{}
	procs := map[string]int64{}
	alerts := map[string]struct {
		reason string
		gids   []string
	}{}
	txns := map[csTxn]bool{}
	var views []view
	for _, r := range rounds {
		for sh, m := range r.scans {
			if ok, _ := m["ok"].(bool); ok {
				kept[sh] = csList(t, m, "xacts")
				for gid := range kept[sh] {
					g, err := indoubt.ParseGID(gid, "sim-app")
					require.NoError(t, err, "gid %q", gid)
					txns[csTxn{g.Txn, g.Instance}] = true
				}
			}
		}
		if ok, _ := r.roster["ok"].(bool); ok {
			procs = csList(t, r.roster, "procs")
		}
		for _, a := range r.alerts {
			id := a["id"].(string)
			if a["action"] == indoubt.ActClear {
				delete(alerts, id)
				continue
			}
			gids, _ := a["gids"].(string)
			alerts[id] = struct {
				reason string
				gids   []string
			}{a["reason"].(string), strings.Split(gids, ",")}
		}
		v := view{kept: map[string]map[string]int64{}, procs: procs, alerts: map[string]struct {
			reason string
			gids   []string
		}{}}
		for sh, l := range kept {
			v.kept[sh] = l
		}
		for id, a := range alerts {
			v.alerts[id] = a
		}
		views = append(views, v)
	}
	out := map[csTxn][]csEvent{}
	for txn := range txns {
		gidOn := func(v view, sh string) (string, int64, bool) {
			for gid, origin := range v.kept[sh] {
				if strings.HasPrefix(gid, txn.name+"_") {
					return gid, origin, true
				}
			}
			return "", 0, false
		}
		class := func(v view) string {
			a, ok := v.alerts["coordinator/"+txn.instance]
			if !ok || !slices.ContainsFunc(a.gids, func(g string) bool { return strings.HasPrefix(g, txn.name+"_") }) {
				return ""
			}
			return a.reason
		}
		orphanOrStuck := func(r string) string {
			if r == "gone" || r == "restarted" {
				return "orphan"
			}
			return r
		}
		var evs []csEvent
		prev, started := "", false
		for i, r := range rounds {
			v := views[i]
			seenAny := false
			for _, sh := range shardNames {
				_, _, ok := gidOn(v, sh)
				seenAny = seenAny || ok
			}
			if !started && !seenAny {
				continue
			}
			started = true
			evs = append(evs, csEvent{Action: indoubt.ActRound})
			if r.abandoned {
				// Its scans as the monitor kept them (a shard whose reply never came: its
				// last good list), then the restart that abandoned it and opened the next.
				for _, sh := range shardNames {
					e := csEvent{Action: indoubt.ActScan, Shard: model[sh]}
					e.OK, _ = r.scans[sh]["ok"].(bool)
					_, _, e.Seen = gidOn(v, sh)
					evs = append(evs, e)
				}
				evs = append(evs, csEvent{Action: indoubt.ActRestart})
				continue
			}
			ro := csEvent{Action: indoubt.ActRoster}
			ro.OK, _ = r.roster["ok"].(bool)
			startedAt, alive := v.procs[txn.instance]
			ro.Alive = alive
			for j, sh := range shardNames {
				e := csEvent{Action: indoubt.ActScan, Shard: model[sh]}
				e.OK, _ = r.scans[sh]["ok"].(bool)
				_, origin, seen := gidOn(v, sh)
				e.Seen = seen
				evs = append(evs, e)
				if !seen {
					continue
				}
				old, over, rest := r.close-origin >= threshold, r.close-origin >= stuckAfter, alive && startedAt > origin
				if j == 0 {
					ro.Old1, ro.Over1, ro.Rest1 = old, over, rest
				} else {
					ro.Old2, ro.Over2, ro.Rest2 = old, over, rest
				}
			}
			evs = append(evs, ro)
			c := class(v)
			if orphanOrStuck(c) != orphanOrStuck(prev) {
				if c == "" {
					evs = append(evs, csEvent{Action: indoubt.ActClear})
				} else {
					evs = append(evs, csEvent{Action: indoubt.ActAlert, Reason: c})
				}
			}
			prev = c
			if !seenAny && c == "" {
				break
			}
		}
		out[txn] = evs
	}
	return out
}

// crossshardTraces is the projections of detsim's bank run at seed, one per transaction,
// sorted by transaction.
func crossshardTraces(t *testing.T, seed uint64) ([]csTxn, [][]csEvent) {
	t.Helper()
	events, params := specEvents(t, "bank", seed, indoubt.Spec)
	require.Contains(t, params, "monitor_threshold_s", "seed %d", seed)
	threshold := int64(params["monitor_threshold_s"]) * 1000
	shards := map[string]bool{}
	for _, m := range events {
		if m["action"] == indoubt.ActScan {
			shards[m["shard"].(string)] = true
		}
	}
	var names []string
	for n := range shards {
		names = append(names, n)
	}
	slices.Sort(names)
	require.Len(t, names, 2, "seed %d: the model has two shards", seed)
	proj := crossshardProject(t, csRounds(t, events, len(names)), names, threshold, 2*threshold)
	var txns []csTxn
	for txn := range proj {
		txns = append(txns, txn)
	}
	slices.SortFunc(txns, func(a, b csTxn) int { return cmp.Compare(a.name, b.name) })
	var out [][]csEvent
	for _, txn := range txns {
		out = append(out, proj[txn])
	}
	return txns, out
}

// TestTraceValidationCrossShard: the CrossShardCommit events of detsim's bank scenario,
// projected onto each transaction (see spec/trace/CrossShardCommitTrace.qnt), are steps the
// model allows, for its corpus seeds and SPEC_TRACE_SEEDS fresh ones (default 2).
func TestTraceValidationCrossShard(t *testing.T) {
	var runs []traceRun[csEvent]
	total, failed := 0, 0
	seeds := traceSeeds(t, "bank", 6, 2)
	for _, seed := range seeds {
		txns, projs := crossshardTraces(t, seed)
		for i, txn := range txns {
			runs = append(runs, traceRun[csEvent]{fmt.Sprintf("seed-%d/%s", seed, strings.TrimPrefix(txn.name, indoubt.GIDPrefix)), projs[i], nil})
			total += len(projs[i])
			for _, e := range projs[i] {
				if e.Action == indoubt.ActRoster && !e.OK {
					failed++
				}
			}
		}
	}
	got := validateTraces(t, "CrossShardCommitTrace", runs...)
	for i, r := range runs {
		if got[i] != len(r.events) {
			t.Errorf("%s: the model cannot explain event %d (%+v) of %d", r.name, got[i], r.events[min(got[i], len(r.events)-1)], len(r.events))
		}
	}
	t.Logf("CrossShardCommitTrace: %d seeds (%v), %d transactions, %d events (%d failed rosters)", len(seeds), seeds, len(runs), total, failed)
}

// TestTraceValidationCrossShardRejects: the projection of bank seed 13070722's stuck
// transaction (its PREPARE landed after its coordinator restarted) with one event changed
// (the stuck alert reported as its coordinator gone, while the roster lists it) or one moved
// earlier (the alert before the Roster of its round) is rejected at the index of that event,
// and the unchanged projection passes.
func TestTraceValidationCrossShardRejects(t *testing.T) {
	txns, projs := crossshardTraces(t, 13070722)
	i := slices.IndexFunc(projs, func(evs []csEvent) bool {
		return slices.ContainsFunc(evs, func(e csEvent) bool { return e.Action == indoubt.ActAlert && e.Reason == "stuck" })
	})
	require.GreaterOrEqual(t, i, 0, "no transaction alerted as stuck in %v", txns)
	events := projs[i]
	alert := indexOf(t, events, "stuck Alert", func(e csEvent) bool { return e.Action == indoubt.ActAlert && e.Reason == "stuck" })
	roster := alert - 1
	require.Equal(t, indoubt.ActRoster, events[roster].Action)
	changed := append([]csEvent(nil), events...)
	changed[alert].Reason = "gone"
	moved := moveEarlier(events, alert, roster)
	got := validateTraces(t, "CrossShardCommitTrace", traceRun[csEvent]{"unchanged", events, nil},
		traceRun[csEvent]{"changed", changed, nil}, traceRun[csEvent]{"moved", moved, nil})
	require.Equal(t, []int{len(events), alert, roster}, got,
		"want the unchanged projection explained, the changed one stopped at its Alert %d, the one with the Alert moved before its Roster at %d", alert, roster)
}

// TestTraceValidationCrossShardRestart: bank seed 65's monitor is restarted while a round
// is open, its two scans in and its roster not (a corpus seed): the projection keeps that
// round and the restart, and the model explains it with its own MonitorRestart, whose
// round is the one the code opened at once. The same projection with the Restart moved
// before the abandoned round's scans is rejected at that round's Round: the model's round
// opens with its scan, and its restart comes after it.
func TestTraceValidationCrossShardRestart(t *testing.T) {
	txns, projs := crossshardTraces(t, 65)
	i := slices.IndexFunc(projs, func(evs []csEvent) bool {
		return slices.ContainsFunc(evs, func(e csEvent) bool { return e.Action == indoubt.ActRestart })
	})
	require.GreaterOrEqual(t, i, 0, "no transaction of seed 65 sees a restart abandon a round: %v", txns)
	events := projs[i]
	restart := indexOf(t, events, "Restart", func(e csEvent) bool { return e.Action == indoubt.ActRestart })
	require.Equal(t, []string{indoubt.ActRound, indoubt.ActScan, indoubt.ActScan}, []string{events[restart-3].Action, events[restart-2].Action, events[restart-1].Action},
		"the abandoned round is projected whole before its restart")
	require.Equal(t, indoubt.ActRound, events[restart+1].Action, "the restart's round follows it")
	moved := moveEarlier(events, restart, restart-2)
	got := validateTraces(t, "CrossShardCommitTrace", traceRun[csEvent]{"unchanged", events, nil}, traceRun[csEvent]{"moved", moved, nil})
	require.Equal(t, []int{len(events), restart - 3}, got,
		"want the unchanged projection explained and the one with the Restart moved before the abandoned round's scans stopped at that round's Round (%d)", restart-3)
}
