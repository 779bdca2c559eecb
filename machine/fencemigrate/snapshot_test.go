package fencemigrate_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine/fencemigrate"
	"loam.dev/router/machine/machinetest"
)

// TestRestoreRefusesInconsistentSnapshots: a snapshot no machine could have written (a
// damaged blob, or one written by someone who can reach the store) is refused with the
// field named, instead of resuming a rollout that would allow C before the backfill or open
// the door on its word.
func TestRestoreRefusesInconsistentSnapshots(t *testing.T) {
	good := func() fencemigrate.Snapshot {
		return fencemigrate.Snapshot{Config: fencemigrate.Config{LeaseTTL: 30_000}, Allowed: fencing.B,
			Pods: map[string]fencing.Version{"p1": fencing.B}, Backfilled: true, ScanStep: "scan/3", DrainTimer: "", Seq: 3}
	}
	_, err := fencemigrate.Restore(good())
	require.NoError(t, err)
	_, err = fencemigrate.Restore(fencemigrate.New(fencemigrate.Config{}).Snapshot())
	require.NoError(t, err, "a new machine's snapshot")

	for name, tc := range map[string]struct {
		edit func(*fencemigrate.Snapshot)
		want string
	}{
		"no lease ttl":           {func(s *fencemigrate.Snapshot) { s.Config.LeaseTTL = 0 }, "Config.LeaseTTL"},
		"unknown version":        {func(s *fencemigrate.Snapshot) { s.Allowed = 9 }, "Allowed"},
		"pod version":            {func(s *fencemigrate.Snapshot) { s.Pods["p1"] = 7 }, `Pods["p1"]`},
		"unnamed pod":            {func(s *fencemigrate.Snapshot) { s.Pods[""] = fencing.B }, "without a name"},
		"backfilled before B":    {func(s *fencemigrate.Snapshot) { s.Allowed = fencing.A }, "Backfilled"},
		"drained, no backfill":   {func(s *fencemigrate.Snapshot) { s.Backfilled, s.Drained, s.ScanStep = false, true, "" }, "Drained"},
		"enabled before C":       {func(s *fencemigrate.Snapshot) { s.Enabled = true }, "Enabled"},
		"enabled, still pending": {func(s *fencemigrate.Snapshot) { s.Allowed, s.Enabled, s.EnableStep = fencing.C, true, "door/2" }, "pending"},
		"step ahead of seq":      {func(s *fencemigrate.Snapshot) { s.ScanStep = "scan/4" }, "ScanStep"},
		"step of another kind":   {func(s *fencemigrate.Snapshot) { s.BackfillStep = "scan/1" }, "BackfillStep"},
		"confirm token":          {func(s *fencemigrate.Snapshot) { s.ConfirmToken = "guess" }, "ConfirmToken"},
	} {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc.edit(&s)
			_, err := fencemigrate.Restore(s)
			require.ErrorContains(t, err, "fencemigrate: cannot restore")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestSnapshotsRestoreWithAStepStillPending: a step id is issued while an older one is
// still pending (a pod fell back to O after the backfill, so the backfill runs again with
// the first drain timer still set), and every snapshot on the way restores: step ids grow,
// so each pending one is within Seq. (make mutate: Seq-- in step gave the new id a lower
// number than the pending timer's, and only restoring that snapshot sees it.)
func TestSnapshotsRestoreWithAStepStillPending(t *testing.T) {
	r := newRollout(t)
	r.advance(fencing.A)
	r.advance(fencing.B)
	bf, ok := find[fencemigrate.RunBackfill](r.quiet(fencemigrate.StartBackfill{}))
	require.True(t, ok)
	tm, ok := find[fencemigrate.SetTimer](r.quiet(fencemigrate.BackfillDone{Step: bf.Step}))
	require.True(t, ok, "the backfill done arms no drain timer")

	_, alarm := find[fencemigrate.Alarm](r.feed(fencemigrate.PodReported{Pod: pods[0], Version: fencing.O}))
	require.True(t, alarm, "a pod on O with B allowed raises no alarm")
	r.quiet(fencemigrate.PodReported{Pod: pods[0], Version: fencing.B})
	again, ok := find[fencemigrate.RunBackfill](r.quiet(fencemigrate.StartBackfill{}))
	require.True(t, ok, "the backfill undone by an O pod cannot run again")
	s := r.e.m.Snapshot()
	require.Equal(t, tm.ID, s.DrainTimer, "the first drain timer is still pending")
	require.NotEqual(t, bf.Step, again.Step, "the second backfill has the first one's step id")
	machinetest.RoundTrip(t, r.e.m, func(s fencemigrate.Snapshot) (*fencemigrate.Machine, error) { return fencemigrate.Restore(s) })
}
