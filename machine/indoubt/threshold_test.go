package indoubt_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestAlertsDueAtTheirBoundaries: an alert is raised at the first round in which its
// condition holds, not one round later, and not before (check.NoEarlyAlert's bound, met
// exactly). In one round at t: a branch exactly Threshold old whose coordinator is gone is
// alerted, one a millisecond younger is not; a branch exactly StuckAfter old whose
// coordinator runs and started before it is stuck, one a millisecond younger is not; a
// coordinator that started after the prepare has restarted, one that started at the very
// millisecond of the prepare has not (it can have prepared it). Found by make mutate: each
// boundary moved by one (< for <=, >= for >) kept every property green, the world's
// times never landing on it.
func TestAlertsDueAtTheirBoundaries(t *testing.T) {
	const now = 1_000_000
	opts := indoubt.Options{Period: time.Second, Threshold: 5 * time.Second} // StuckAfter 10 s
	th, stuck := opts.Threshold.Milliseconds(), 2*opts.Threshold.Milliseconds()
	gid := func(inst string) string { return indoubt.GIDPrefix + inst + "_1_0" }
	xacts := []indoubt.Xact{
		{GID: gid("gone"), Prepared: now - th},
		{GID: gid("goneyoung"), Prepared: now - th + 1},
		{GID: gid("stuck"), Prepared: now - stuck},
		{GID: gid("runs"), Prepared: now - stuck + 1},
		{GID: gid("after"), Prepared: now - th},
		{GID: gid("same"), Prepared: now - th},
	}
	procs := []indoubt.Process{
		{ID: "stuck", Started: 1}, {ID: "runs", Started: 1},
		{ID: "after", Started: now - th + 1}, {ID: "same", Started: now - th},
	}
	f := newFixture(opts, now)
	f.round(xacts, procs, false)
	got := map[string]indoubt.Reason{}
	for id, a := range f.raised {
		got[id] = a.Reason
	}
	require.Equal(t, map[string]indoubt.Reason{
		"coordinator/gone":  indoubt.ReasonGone,
		"coordinator/stuck": indoubt.ReasonStuck,
		"coordinator/after": indoubt.ReasonRestarted,
	}, got, "alerts raised at t=%d: %v", now, slices.Sorted(maps.Keys(got)))
}
