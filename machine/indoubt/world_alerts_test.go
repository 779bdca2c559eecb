package indoubt_test

import (
	"maps"
	"slices"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// The checks below were added when make mutate showed that the world's other checks (no
// alert younger than the threshold, none decided twice, all cleared at the end) let a
// monitor through that alerts too little, too late or with the wrong content: every
// alert's content agrees with the gids it names, no stuck alert before StuckAfter, and in a
// steady world every transaction in doubt past its time is alerted, and a shard is alerted
// unscanned after exactly BlindAfter failed scans (not one before).

// named lists the branches alert c names with when the world prepared each (the world's
// truth, not the prepare time the alert claims), for check.NoEarlyAlert. A branch resolved
// since the scan is judged by the time the alert claims.
func (w *world) named(c indoubt.Alert) []check.AlertedBranch {
	var out []check.AlertedBranch
	for _, t := range c.Txns {
		for _, p := range t.Parts {
			at := t.Prepared
			if x, ok := w.txns[p.Shard][p.GID]; ok {
				at = x.Prepared
			}
			out = append(out, check.AlertedBranch{Alert: c.ID, GID: p.GID, Prepared: at, Decided: w.now})
		}
	}
	return out
}

// checkStuck checks a new decision's reason against its timing (the gids it names are
// check.Decisions's).
func (w *world) checkStuck(c indoubt.Alert) {
	// An alert has one reason for all its transactions (the first decided), so a stuck
	// alert may also name younger ones whose coordinator restarted; its oldest must be stuck
	// when it is first raised (a raised alert keeps its reason while the roster is stale).
	if _, raised := w.chk.Raised()[c.ID]; !raised && c.Reason == indoubt.ReasonStuck && len(c.Txns) > 0 && w.now-c.Txns[0].Prepared < 2*propOpts.Threshold.Milliseconds() {
		w.violate("alert %s says %s is stuck at %d, prepared at %d: before StuckAfter (twice the threshold)", c.ID, c.Txns[0].Name, w.now, c.Txns[0].Prepared)
	}
}

// round fires the round timer and answers every read and delivery, failing the scans of
// the shards in fail and losing the replies of those in lose (the round then closes at the
// next timer, with those scans late).
func (w *world) round(fail map[string]bool, lose ...string) {
	w.now, w.timer = max(w.now, w.timer), 0
	w.step(indoubt.TimerFired{ID: indoubt.RoundTimer})
	for len(w.out) > 0 {
		c := w.out[0]
		w.out = w.out[1:]
		lp, ok := c.(indoubt.ListPrepared)
		if ok && slices.Contains(lose, lp.Shard) {
			continue
		}
		w.step(w.reply(c, ok && fail[lp.Shard]))
	}
}

// steady holds the world still (every read answers, nobody prepares, dies or restarts)
// until every transaction is older than StuckAfter, and requires exactly the alerts the
// world calls for; then fails one shard's scans and requires the unscanned alert on the
// BlindAfter-th failure and not before.
func (w *world) steady() {
	if w.shards == nil {
		w.shards = allShards
		w.step(indoubt.Track{Shards: w.shards})
	}
	for len(w.out) > 0 { // what was in flight answers
		c := w.out[0]
		w.out = w.out[1:]
		w.step(w.reply(c, false))
	}
	// Two reliable rounds: every branch past its threshold whose coordinator is gone (or
	// that is not PgDog's) is alerted by then, by its prepare time, not by when the
	// monitor first saw it.
	w.round(nil)
	w.round(nil)
	for _, sh := range w.shards {
		for gid, x := range w.txns[sh] {
			if w.now-x.Prepared < propOpts.Threshold.Milliseconds() {
				continue
			}
			id := "foreign/" + sh
			if g, err := indoubt.ParseGID(gid, propOpts.Deployment); err == nil {
				if _, live := w.procs[g.Instance]; live {
					continue
				}
				id = "coordinator/" + g.Instance
			}
			if _, ok := w.chk.Raised()[id]; !ok {
				w.violate("%s on %s, prepared at %d, not alerted (%s) at %d after two reliable rounds", gid, sh, x.Prepared, id, w.now)
			}
		}
	}
	stuck := 2 * propOpts.Threshold.Milliseconds()
	start := w.now
	for w.now < start+stuck+2*propOpts.Period.Milliseconds() || w.timer == 0 {
		w.round(nil)
		if w.timer == 0 {
			w.violate("the monitor set no round timer")
			return
		}
	}
	want := map[string]indoubt.Reason{}
	for _, sh := range w.shards {
		for gid := range w.txns[sh] {
			g, err := indoubt.ParseGID(gid, propOpts.Deployment)
			if err != nil {
				want["foreign/"+sh] = indoubt.ReasonForeign
				continue
			}
			if _, live := w.procs[g.Instance]; !live {
				want["coordinator/"+g.Instance] = indoubt.ReasonGone
			} else if _, ok := want["coordinator/"+g.Instance]; !ok {
				want["coordinator/"+g.Instance] = "" // restarted or stuck, by the transaction's age
			}
		}
	}
	got := slices.Sorted(maps.Keys(w.chk.Raised()))
	if wantIDs := slices.Sorted(maps.Keys(want)); !slices.Equal(got, wantIDs) {
		w.violate("steady world at %d: alerts %v, want %v", w.now, got, wantIDs)
	}
	for id, r := range want {
		if a, ok := w.chk.Raised()[id]; ok && r != "" && a.Reason != r {
			w.violate("steady world: alert %s says %s, want %s", id, a.Reason, r)
		} else if ok && r == "" && a.Reason != indoubt.ReasonStuck && a.Reason != indoubt.ReasonRestarted {
			w.violate("steady world: alert %s says %s of a coordinator that runs (want stuck or restarted)", id, a.Reason)
		}
	}
	// One shard's scans fail: unscanned on the BlindAfter-th failure, not before.
	sh := w.shards[0]
	id := "unscanned/" + sh
	for i := 1; i <= propOpts.BlindAfter; i++ {
		w.round(map[string]bool{sh: true})
		_, raised := w.chk.Raised()[id]
		if i < propOpts.BlindAfter && raised {
			w.violate("%s raised after %d failed scans, BlindAfter is %d", id, i, propOpts.BlindAfter)
		}
		if i == propOpts.BlindAfter && !raised {
			w.violate("%s not raised after %d failed scans (BlindAfter)", id, i)
		}
	}
	w.round(nil)
	if _, raised := w.chk.Raised()[id]; raised {
		w.violate("%s still raised after a scan succeeded", id)
	}
	// The same with the scans' replies lost: a scan with no reply by the next round's timer
	// counts as failed, so the BlindAfter-th such round raises the alert.
	for i := 1; i <= propOpts.BlindAfter+1; i++ {
		w.round(nil, sh) // closes the previous round (its scan of sh late) and starts one
		_, raised := w.chk.Raised()[id]
		if late := i - 1; late < propOpts.BlindAfter && raised {
			w.violate("%s raised after %d late scans, BlindAfter is %d", id, late, propOpts.BlindAfter)
		} else if late == propOpts.BlindAfter && !raised {
			w.violate("%s not raised after %d late scans (BlindAfter)", id, late)
		}
	}
	w.round(nil)
	w.round(nil)
	if _, raised := w.chk.Raised()[id]; raised {
		w.violate("%s still raised after a scan succeeded", id)
	}
}

// checkTrace checks the spec events one input emitted against what the world did (make
// mutate: an inverted ok, or rounds counted down, changed only the golden scripts' text):
// each round is numbered one above the last, across driver restarts too; a scan, roster or
// delivery event says ok exactly when the reply it reports carried no error, with err set
// exactly when not ok; and the reads a round closes without (on its timer) are reported
// failed, in the round they belong to.
func (w *world) checkTrace(in indoubt.Input, evs []machine.SpecEvent) {
	for _, e := range evs {
		ok, _ := e.Get("ok")
		_, hasErr := e.Get("err")
		round, _ := e.Get("round")
		var replyErr error
		replied := false
		switch e.Action {
		case indoubt.ActRound:
			w.rounds++
			if round.Int() != w.rounds {
				w.violate("round %d started, numbered %d", w.rounds, round.Int())
			}
			continue
		case indoubt.ActScan:
			shard, _ := e.Get("shard")
			if p, isP := in.(indoubt.Prepared); isP && p.Shard == shard.Str() {
				replied, replyErr = true, p.Err
			}
		case indoubt.ActRoster:
			if r, isR := in.(indoubt.Roster); isR {
				replied, replyErr = true, r.Err
			}
		case indoubt.ActDeliver:
			d, isD := in.(indoubt.Delivered)
			if !isD {
				w.violate("%s emitted on %T", e, in)
				continue
			}
			if ok.Bool() != (d.Err == nil) || hasErr == ok.Bool() {
				w.violate("%s for a delivery that returned %v", e, d.Err)
			}
			continue
		default:
			continue
		}
		switch {
		case round.Int() != w.rounds:
			w.violate("%s in round %d", e, w.rounds)
		case hasErr == ok.Bool():
			w.violate("%s: ok and err disagree", e)
		case replied && ok.Bool() != (replyErr == nil):
			w.violate("%s for a reply with error %v", e, replyErr)
		case !replied && ok.Bool():
			w.violate("%s with no reply (on %T)", e, in)
		}
	}
}
