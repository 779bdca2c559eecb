package fencemigrate_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// rollout drives the machine the way a deploy system that follows it does, asserting what
// each step must and must not do (outcomes, not text): the semantic counterpart of the
// rollout golden, which make mutate leaves out of its kill set.
type rollout struct {
	t   *testing.T
	e   *env
	ttl int64
}

func newRollout(t *testing.T) *rollout {
	const ttl = 30_000
	return &rollout{t: t, ttl: ttl, e: &env{m: fencemigrate.New(fencemigrate.Config{LeaseTTL: ttl}), now: 1000, lastStep: map[string]string{}}}
}

// feed feeds one input, checks the machine still restores from its snapshot, and returns
// the commands.
func (r *rollout) feed(in fencemigrate.Input) []fencemigrate.Command {
	out := r.e.feed(in)
	_, err := fencemigrate.Restore(r.e.m.Snapshot())
	require.NoError(r.t, err, "after %#v the machine's own snapshot does not restore", in)
	return out
}

func find[C fencemigrate.Command](out []fencemigrate.Command) (C, bool) {
	for _, c := range out {
		if c, ok := c.(C); ok {
			return c, true
		}
	}
	var zero C
	return zero, false
}

// quiet feeds in and requires neither a refusal nor an alarm.
func (r *rollout) quiet(in fencemigrate.Input) []fencemigrate.Command {
	out := r.feed(in)
	if c, ok := find[fencemigrate.Refused](out); ok {
		r.t.Fatalf("%#v refused: %+v", in, c)
	}
	if c, ok := find[fencemigrate.Alarm](out); ok {
		r.t.Fatalf("%#v raised a false alarm: %+v", in, c)
	}
	return out
}

// advance allows v and rolls every pod to it, one after another; before a pod rolls it
// reports the version it still runs, which is allowed (the window is the allowed version
// and the one before, until the door is committed).
func (r *rollout) advance(v fencing.Version) {
	out := r.quiet(fencemigrate.Advance{To: v})
	a, ok := find[fencemigrate.AllowVersion](out)
	require.True(r.t, ok, "Advance to %v allows nothing", v)
	require.Equal(r.t, v, a.Version)
	for _, p := range pods {
		if v > fencing.A {
			r.quiet(fencemigrate.PodReported{Pod: p, Version: v - 1})
		}
		r.quiet(fencemigrate.PodReported{Pod: p, Version: v})
	}
}

// TestRolloutReachesTheDoor: a fleet that follows every allowance gets to B, the backfill,
// the drain (not proven before one lease TTL after the backfill, and a pod repeating its B
// report does not undo it), C and the door, with no refusal and no alarm on the way; once
// the door's command is out, a pod back on B raises an alarm.
func TestRolloutReachesTheDoor(t *testing.T) {
	r := newRollout(t)
	r.advance(fencing.A)
	r.advance(fencing.B)

	bf, ok := find[fencemigrate.RunBackfill](r.quiet(fencemigrate.StartBackfill{}))
	require.True(t, ok, "StartBackfill with the fleet on B runs no backfill")
	out := r.quiet(fencemigrate.BackfillDone{Step: bf.Step, Sessions: 2})
	tm, ok := find[fencemigrate.SetTimer](out)
	require.True(t, ok, "the backfill done arms no drain timer")
	require.GreaterOrEqual(t, tm.At, r.e.now+r.ttl, "the drain is waited out for a whole lease TTL: every old-key lease written before the backfill must have expired")
	_, scanned := find[fencemigrate.ScanOldLeases](out)
	require.False(t, scanned, "scanned before the drain timer fired")

	r.e.now = tm.At
	sc, ok := find[fencemigrate.ScanOldLeases](r.quiet(fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: tm.ID}}))
	require.True(t, ok, "the drain timer asks for no scan")
	r.quiet(fencemigrate.OldLeasesScanned{Step: sc.Step, Live: 0})
	r.quiet(fencemigrate.PodReported{Pod: pods[0], Version: fencing.B}) // a B pod's heartbeat

	r.advance(fencing.C)
	ask, ok := find[fencemigrate.AskConfirmation](r.quiet(fencemigrate.RequestEnable{}))
	require.True(t, ok, "RequestEnable with the fleet on C and the drain proven asks no confirmation")
	en, ok := find[fencemigrate.EnableCluster](r.quiet(fencemigrate.Confirm{Token: ask.Token}))
	require.True(t, ok, "the confirmation sends no EnableCluster")
	require.False(t, r.e.m.Enabled(), "enabled before the cluster answered")

	out = r.feed(fencemigrate.PodReported{Pod: pods[1], Version: fencing.B})
	_, alarm := find[fencemigrate.Alarm](out)
	require.True(t, alarm, "a pod back on B while the door's command is out raises no alarm")
	r.quiet(fencemigrate.PodReported{Pod: pods[1], Version: fencing.C})

	r.rec().Take()
	r.quiet(fencemigrate.ClusterEnabled{Step: en.Step})
	require.True(t, r.e.m.Enabled())
	require.Equal(t, fencing.C, r.e.m.Allowed())
	requireEnabledEvent(t, r.rec().Take(), true)
}

// TestFailedEnableIsReportedFailed: an EnableCluster that failed leaves the door shut,
// raises an alarm, and its trace event says it failed (spec/FencingMigration.qnt reads ok).
func TestFailedEnableIsReportedFailed(t *testing.T) {
	r := newRollout(t)
	r.advance(fencing.A)
	r.advance(fencing.B)
	bf, _ := find[fencemigrate.RunBackfill](r.quiet(fencemigrate.StartBackfill{}))
	tm, _ := find[fencemigrate.SetTimer](r.quiet(fencemigrate.BackfillDone{Step: bf.Step}))
	r.e.now = tm.At
	sc, _ := find[fencemigrate.ScanOldLeases](r.quiet(fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: tm.ID}}))
	r.quiet(fencemigrate.OldLeasesScanned{Step: sc.Step})
	r.advance(fencing.C)
	ask, _ := find[fencemigrate.AskConfirmation](r.quiet(fencemigrate.RequestEnable{}))
	en, ok := find[fencemigrate.EnableCluster](r.quiet(fencemigrate.Confirm{Token: ask.Token}))
	require.True(t, ok)
	r.rec().Take()
	out := r.feed(fencemigrate.ClusterEnabled{Step: en.Step, Err: errors.New("ERR cluster support disabled")})
	_, alarm := find[fencemigrate.Alarm](out)
	require.True(t, alarm, "a failed enable raises no alarm")
	require.False(t, r.e.m.Enabled())
	requireEnabledEvent(t, r.rec().Take(), false)
}

func (r *rollout) rec() *machine.Recorder { return &r.e.rec }

func requireEnabledEvent(t *testing.T, evs []machine.SpecEvent, ok bool) {
	t.Helper()
	for _, e := range evs {
		if e.Spec == fencemigrate.Spec && e.Action == "Enabled" {
			v, has := e.Get("ok")
			require.True(t, has)
			require.Equal(t, ok, v.Bool(), "the Enabled event's ok")
			return
		}
	}
	t.Fatalf("no Enabled event in %v", evs)
}

// TestRefusalNamesThePodsBehind: a refused allowance names exactly the pods not yet on the
// version it waits for, with what they run, so the operator knows which to roll.
func TestRefusalNamesThePodsBehind(t *testing.T) {
	r := newRollout(t)
	r.advance(fencing.A)
	r.quiet(fencemigrate.Advance{To: fencing.B})
	r.quiet(fencemigrate.PodReported{Pod: pods[0], Version: fencing.B})
	r.quiet(fencemigrate.PodReported{Pod: pods[2], Version: fencing.B})
	ref, ok := find[fencemigrate.Refused](r.feed(fencemigrate.StartBackfill{}))
	require.True(t, ok, "backfill with %s still on A is not refused", pods[1])
	require.Contains(t, ref.Detail, pods[1]+"=A")
	require.NotContains(t, ref.Detail, pods[0])
	require.NotContains(t, ref.Detail, pods[2])
}
