package spec

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// TestModelReplayFencingMigration is issue 18's model-based test for the FencingMigration
// model: runs its simulator generates are replayed on machine/fencemigrate. The replay
// starts the machine with the roster's three pods reported on O, then feeds each model
// step as the machine's input: a pod's deploy, rollback or repeated report (PodReported),
// the operator's requests (Advance to the next version, StartBackfill, RequestEnable,
// Confirm with the token the machine asked to echo; the model's Refuse is the first of
// those whose gate the model's state fails), the backfill's, the scan's (the live old
// leases the model's directory holds) and the door's answers, and the drain timer firing
// at the model's tick (a tick is a second of the machine's clock). The directory's steps
// (Acquire, Renew, Release) reach the machine only through the scan. After each step the
// machine must have emitted exactly the model's actions and its state must be the model's:
// the version allowed, backfilled, drained, enabled, and which of the backfill, the drain
// timer (and its deadline), the scan, the confirmation and the door command is pending.
//
// SPEC_REPLAY_RUNS (default 20) sets how many runs. The same runs replayed on the machine
// with its M4 mutant (the gate into C without the backfill and the drain) must fail.
func TestModelReplayFencingMigration(t *testing.T) {
	runs := modelRuns[fmState](t, "FencingMigration.qnt", "FencingMigrationMC", replayRuns(t, 20), 90)
	steps, enabled := 0, 0
	for _, r := range runs {
		require.NoError(t, replayFencing(r, fencing.NoMutant))
		steps += len(r.States) - 1
		if r.States[len(r.States)-1].S.Enabled {
			enabled++
		}
	}
	t.Logf("%d model runs (%d steps) replayed on machine/fencemigrate; %d enabled the door", len(runs), steps, enabled)
	require.Greater(t, enabled, 0, "no replayed run reached the door")
	err := firstReplayError(runs, func(r modelRun[fmState]) error { return replayFencing(r, fencing.M4) })
	var re *replayError
	require.ErrorAs(t, err, &re, "machine/fencemigrate with M4 replayed every model run: the replay does not check the gate into C")
	t.Logf("M4: %s", firstLine(err))
}

type fmState struct {
	Action string
	Picks  map[string]any
	S      struct {
		Now, Allowed, DrainTimer                          int
		Pod                                               map[string]int
		Backfilled, BackfillPending, Drained, ScanPending bool
		ConfirmAsked, EnablePending, Enabled              bool
		OldLease                                          struct{ Exp int }
		Emitted                                           []string
	}
}

// fmTick is one model tick on the machine's clock (ms); the lease TTL is the model's 2.
const fmTick = 1000

// replayFencing feeds one model run to a fresh machine (with mu on) and returns the first
// step where the machine does not do what the model did.
func replayFencing(run modelRun[fmState], mu fencing.Mutant) (err error) {
	states := run.States
	m := fencemigrate.New(fencemigrate.Config{LeaseTTL: 2 * fmTick, Mutant: mu})
	rp := newReplayer(run.Name, func(i int) string { return states[i].Action })
	tr, rng, fail := rp.tr, rp.rng, rp.fail
	defer recoverReplay(&err)
	// What the machine has asked for and not been answered: by command kind.
	out := map[string]fencemigrate.Command{}
	timerAt := map[string]int64{}
	now := int64(0)
	feed := func(in fencemigrate.Input) {
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in) {
			rp.log = append(rp.log, fmt.Sprintf("      cmd %T%+v", c, c))
			switch c := c.(type) {
			case fencemigrate.SetTimer:
				timerAt[c.ID] = c.At
			case fencemigrate.RunBackfill, fencemigrate.ScanOldLeases, fencemigrate.AskConfirmation, fencemigrate.EnableCluster:
				out[typeName(c)] = c
			}
		}
	}
	answer := func(kind string) fencemigrate.Command {
		c, ok := out[kind]
		if !ok {
			fail("the model answers %s, the machine has none out", kind)
		}
		delete(out, kind)
		return c
	}
	for _, p := range []string{"p1", "p2", "p3"} { // the roster at the start: every pod on O
		feed(fencemigrate.PodReported{Pod: p, Version: fencing.O})
	}
	tr.Take()
	for i := 1; i < len(states); i++ {
		rp.step = i
		p, s := states[i-1].S, states[i].S
		act, picks := states[i].Action, states[i].Picks
		pod, _ := picks["p"].(string)
		now = int64(s.Now) * fmTick
		rp.log = append(rp.log, fmt.Sprintf("  %d %s %v -> model now=%d pods=%v allowed=%d emitted=%v", i, act, picks, s.Now, s.Pod, s.Allowed, s.Emitted))
		switch act {
		case "DeployUp", "Rollback", "ReportSame":
			feed(fencemigrate.PodReported{Pod: pod, Version: fencing.Version(s.Pod[pod])})
		case "Acquire", "Renew", "Release", "Tick", "": // the directory and the clock (Renew and Release: an any leaves them unnamed)
		case "Advance":
			feed(fencemigrate.Advance{To: fencing.Version(p.Allowed + 1)})
		case "StartBackfill":
			feed(fencemigrate.StartBackfill{})
		case "Refuse":
			feed(fmRefused(states[i-1]))
		case "BackfillDone":
			c := answer("RunBackfill").(fencemigrate.RunBackfill)
			feed(fencemigrate.BackfillDone{Step: c.Step, Sessions: 1})
		case "DrainTimerFired":
			snap := m.Snapshot()
			if snap.DrainTimer == "" {
				fail("the model fires the drain timer, the machine set none")
			}
			feed(fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: snap.DrainTimer}})
		case "ScanDone":
			c := answer("ScanOldLeases").(fencemigrate.ScanOldLeases)
			live := 0
			if p.OldLease.Exp > p.Now {
				live = 1
			}
			feed(fencemigrate.OldLeasesScanned{Step: c.Step, Live: live})
		case "RequestEnable":
			feed(fencemigrate.RequestEnable{})
		case "Confirm":
			c, ok := out["AskConfirmation"].(fencemigrate.AskConfirmation)
			if !ok {
				fail("the model confirms, the machine asked for no confirmation")
			}
			feed(fencemigrate.Confirm{Token: c.Token})
		case "ClusterEnabled":
			c := answer("EnableCluster").(fencemigrate.EnableCluster)
			feed(fencemigrate.ClusterEnabled{Step: c.Step})
		default:
			fail("unknown model action %q", act)
		}
		if acts := tr.Take(); !sameActions(acts, s.Emitted) {
			fail("the machine emitted %v, the model %v", actionsOf(acts), s.Emitted)
		}
		sn := m.Snapshot()
		if sn.ConfirmToken == "" {
			delete(out, "AskConfirmation")
		}
		got := fmt.Sprint(int(sn.Allowed), sn.Backfilled, sn.BackfillStep != "", sn.Drained, sn.DrainTimer != "", sn.ScanStep != "",
			sn.ConfirmToken != "", sn.EnableStep != "", sn.Enabled)
		want := fmt.Sprint(s.Allowed, s.Backfilled, s.BackfillPending, s.Drained, s.DrainTimer >= 0, s.ScanPending,
			s.ConfirmAsked, s.EnablePending, s.Enabled)
		if got != want {
			fail("the machine's allowed, backfilled, backfill out, drained, drain timer set, scan out, confirmation asked, door out, enabled are %s, the model's %s", got, want)
		}
		if sn.DrainTimer != "" && timerAt[sn.DrainTimer] != int64(s.DrainTimer)*fmTick {
			fail("the machine's drain timer fires at %d ms, the model's at tick %d", timerAt[sn.DrainTimer], s.DrainTimer)
		}
		for kind, pending := range map[string]bool{"RunBackfill": s.BackfillPending, "ScanOldLeases": s.ScanPending, "EnableCluster": s.EnablePending} {
			if _, ok := out[kind]; ok != pending {
				fail("the machine has %s out: %v, the model %v", kind, ok, pending)
			}
		}
	}
	return nil
}

// fmRefused is the request the model's Refuse stands for: the first of Advance (to the
// next version), StartBackfill and RequestEnable whose gate the model's state p fails.
// (Confirm refused is the model's Confirm.)
func fmRefused(p fmState) fencemigrate.Input {
	s := p.S
	all := func(vs ...int) bool {
		for _, v := range s.Pod {
			if !slices.Contains(vs, v) {
				return false
			}
		}
		return true
	}
	gateDrained := s.Backfilled && s.Drained
	gateC := all(2) && gateDrained
	advanceOk := !s.Enabled && s.Allowed < 3 && (s.Allowed+1 == 3 && gateC || s.Allowed+1 != 3 && all(s.Allowed))
	backfillOk := !s.Enabled && !s.BackfillPending && !s.Backfilled && s.Allowed >= 2 && all(2, 3)
	switch {
	case !advanceOk:
		return fencemigrate.Advance{To: fencing.Version(s.Allowed + 1)}
	case !backfillOk:
		return fencemigrate.StartBackfill{}
	}
	return fencemigrate.RequestEnable{}
}
