package spec

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// The replay of CrossShardCommit runs on machine/indoubt, the in-doubt monitor: the model's
// coordinator and its two branches are the world the monitor scans. Its tests are in
// crossshard_replay_normal_test.go (the monitor as built) and
// crossshard_replay_mutant_test.go (-tags loam_mutant_indoubt_commit: the monitor that
// commits an orphan, which the replay must catch).

type csState struct {
	Action string
	Picks  map[string]any
	S      struct {
		Alive   bool
		Epoch   int
		Branch  map[string]string
		Rounds  int
		Phase   string
		Scan    []string
		Alert   string
		Emitted []string
	}
}

// The monitor's clock: round k opens (the model's MonitorScan) at k·csPeriod, or when the
// monitor's round timer says if a restart opened the round before, and its roster answers
// (MonitorRoster) at k·csPeriod + csPeriod/2; every other step takes a millisecond. Ages in
// the model are rounds that saw a branch prepared; the monitor ages a branch from its
// prepared time, so a branch is stuck (seen in more than StuckAfter = 2 rounds) once 2.5
// periods old: wherever in a round the PREPARE landed, that is its third round seen. The
// orphan threshold (1 round) is half a period: a branch the round's first scan saw is older
// at its roster, one only a restart's scan saw (it landed within the round, which the model
// does not count for it) younger.
const csPeriod = 1000

var csShards = []string{"s1", "s2"}

// csGID is the branch's gid: one transaction of coordinator node1 (a stable NODE_ID, so a
// restart shows as a later start time), its shard position last.
func csGID(sh string) string {
	return fmt.Sprintf("%snode1_42_%d", indoubt.GIDPrefix, slices.Index(csShards, sh))
}

// csClass is the model's name for an alert reason: orphan (gone or restarted) or stuck.
func csClass(r indoubt.Reason) string {
	switch r {
	case indoubt.ReasonGone, indoubt.ReasonRestarted:
		return "orphan"
	case indoubt.ReasonStuck:
		return "stuck"
	}
	return string(r)
}

// replayCrossShard feeds one model run to a fresh monitor and returns the first step where
// the monitor does not do what the model did.
func replayCrossShard(run modelRun[csState]) (err error) {
	states := run.States
	opts := indoubt.Options{Period: csPeriod * time.Millisecond, Threshold: csPeriod / 2 * time.Millisecond,
		StuckAfter: 5 * csPeriod / 2 * time.Millisecond}
	m := indoubt.New(opts)
	rp := newReplayer(run.Name, func(i int) string { return states[i].Action })
	tr, rng, fail := rp.tr, rp.rng, rp.fail
	defer recoverReplay(&err)
	now := int64(0)
	// The world: each branch's state (the model's, but for what the monitor commits) and
	// when it was prepared, the coordinator's start time; the monitor's reads in flight and
	// its alert (the model's one alert: the coordinator's).
	branch := map[string]string{"s1": "none", "s2": "none"}
	prepared := map[string]int64{}
	started := int64(1)
	scans := map[string]indoubt.ListPrepared{}
	var roster *indoubt.ListInstances
	alert := ""
	tracking := false
	timerAt := int64(0) // the round timer's deadline: a restart's round starts the period anew
	feed := func(in indoubt.Input) {
		out := m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in)
		for len(out) > 0 {
			c := out[0]
			out = out[1:]
			rp.log = append(rp.log, fmt.Sprintf("      cmd %T%+v", c, c))
			switch c := c.(type) {
			case indoubt.ListPrepared:
				scans[c.Shard] = c
			case indoubt.ListInstances:
				roster = &c
			case indoubt.Alert: // the sink takes it at once
				alert = csClass(c.Reason)
				out = append(out, m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, indoubt.Delivered{Step: c.Step})...)
			case indoubt.ClearAlert:
				alert = ""
				out = append(out, m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, indoubt.Delivered{Step: c.Step})...)
			case indoubt.SetTimer:
				timerAt = c.At
			default:
				// Any other command resolves a transaction: the forbidden guess. Its
				// effect is a commit of the branch it names.
				if sh, ok := csCommitted(c); ok {
					branch[sh] = "committed"
				}
			}
		}
	}
	for i := 1; i < len(states); i++ {
		rp.step = i
		p, s := states[i-1].S, states[i].S
		act, picks := states[i].Action, states[i].Picks
		sh, _ := picks["sh"].(string)
		now++
		rp.log = append(rp.log, fmt.Sprintf("  %d %s %v -> model alive=%v epoch=%d branch=%v rounds=%d alert=%q emitted=%v",
			i, act, picks, s.Alive, s.Epoch, s.Branch, s.Rounds, s.Alert, s.Emitted))
		switch act {
		case "SendPrepare", "Decide", "CommitBranch", "AbortBranch", "Crash", "Restart":
			// The coordinator: its branches as the model's (a restart's recovery finishes
			// what the log says), and when its process started.
			for _, x := range csShards {
				branch[x] = s.Branch[x]
			}
			if act == "Restart" {
				started = now
			}
		case "PrepareLands":
			branch[sh], prepared[sh] = "prepared", now
		case "MonitorScan", "MonitorRestart":
			switch {
			case act == "MonitorRestart":
				// The driver restarts the monitor from its snapshot, the round in flight's
				// answers lost; the restarted monitor opens a new round at once, whose
				// reads are answered at the model's next MonitorScan.
				r, err := indoubt.Restore(m.Snapshot(), opts)
				if err != nil {
					fail("the monitor's snapshot does not restore: %v", err)
				}
				m, scans, roster = r, map[string]indoubt.ListPrepared{}, nil
				feed(indoubt.Restarted{})
			case p.Phase == "restarted": // the restart's round is open already
				now = max(now, int64(p.Rounds+1)*csPeriod)
			case !tracking:
				now = int64(p.Rounds+1) * csPeriod
				tracking = true
				feed(indoubt.Track{Shards: csShards})
			default:
				now = max(now, int64(p.Rounds+1)*csPeriod, timerAt)
				feed(indoubt.TimerFired{ID: indoubt.RoundTimer})
			}
			for _, x := range csShards {
				if act == "MonitorRestart" {
					break
				}
				c, ok := scans[x]
				if !ok {
					fail("the model scans %s, the monitor sent no ListPrepared for it", x)
				}
				delete(scans, x)
				var xs []indoubt.Xact
				if branch[x] == "prepared" {
					xs = append(xs, indoubt.Xact{GID: csGID(x), Prepared: prepared[x]})
				}
				feed(indoubt.Prepared{Step: c.Step, Shard: x, Xacts: xs})
			}
		case "MonitorRoster", "MonitorRosterOf":
			now = max(now, int64(p.Rounds+1)*csPeriod+csPeriod/2)
			if roster == nil {
				fail("the model's roster arrives, the monitor asked for none")
			}
			r := indoubt.Roster{Step: roster.Step}
			roster = nil
			if ok, _ := picks["ok"].(bool); !ok {
				r.Err = errors.New("kubernetes: the server is currently unable to handle the request")
			} else if p.Alive {
				r.Processes = []indoubt.Process{{ID: "node1", Started: started}}
			}
			prev := alert
			feed(r)
			if prev == alert && !slices.Contains(s.Emitted, "MonitorAlert") {
				// The monitor updates an alert whose content changed (a second branch of
				// the transaction joined it); the model's one alert has no content.
				tr.Events = slices.DeleteFunc(tr.Events, func(e machine.SpecEvent) bool { return e.Action == indoubt.ActAlert })
			}
		default:
			fail("unknown model action %q", act)
		}
		// The actions: the monitor's without the ones the model leaves out (Track, the
		// sink's acknowledgements), each run of one folded into one (a Scan per shard).
		var acts []string
		for _, e := range tr.Take() {
			if e.Action == indoubt.ActTrack || e.Action == indoubt.ActDeliver {
				continue
			}
			if n := len(acts); n == 0 || acts[n-1] != e.Action {
				acts = append(acts, e.Action)
			}
		}
		if !slices.Equal(acts, s.Emitted) && len(acts)+len(s.Emitted) > 0 {
			fail("the monitor emitted %v, the model %v", acts, s.Emitted)
		}
		if alert != s.Alert {
			fail("the monitor's alert is %q, the model's %q", alert, s.Alert)
		}
		for _, x := range csShards {
			if branch[x] != s.Branch[x] {
				fail("branch %s is %s, the model's %s", x, branch[x], s.Branch[x])
			}
		}
	}
	return nil
}

// crossShardRuns are the runs both builds replay.
func crossShardRuns(t *testing.T) []modelRun[csState] {
	return modelRuns[csState](t, "CrossShardCommit.qnt", "CrossShardCommitMC", replayRuns(t, 150), 40)
}
