package indoubt_test

import (
	"errors"
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
	got := f.reasons()
	require.Equal(t, map[string]indoubt.Reason{
		"coordinator/gone":  indoubt.ReasonGone,
		"coordinator/stuck": indoubt.ReasonStuck,
		"coordinator/after": indoubt.ReasonRestarted,
	}, got, "alerts raised at t=%d: %v", now, slices.Sorted(maps.Keys(got)))
}

// TestStuckAlertedWithoutARoster: with the roster failing every round (the orchestrator's
// API down), a branch prepared StuckAfter ago is alerted stuck all the same (its age alone
// says it is in doubt), one younger is not (gone or running cannot be told without the
// roster), and an alert raised before the roster failed keeps its reason. Found by the
// CrossShardCommit model once its roster could fail: the monitor decided nothing new
// without a roster, so no branch was ever alerted while it stayed down.
func TestStuckAlertedWithoutARoster(t *testing.T) {
	const now = 1_000_000
	opts := indoubt.Options{Period: time.Second, Threshold: 5 * time.Second} // StuckAfter 10 s
	th, stuck := opts.Threshold.Milliseconds(), 2*opts.Threshold.Milliseconds()
	gid := func(inst string) string { return indoubt.GIDPrefix + inst + "_1_0" }
	f := newFixture(opts, now)
	f.round([]indoubt.Xact{{GID: gid("gone"), Prepared: now - th}}, nil, false) // alerted gone, with a roster
	f.rosterErr = errors.New("kubernetes: the server is currently unable to handle the request")
	xacts := []indoubt.Xact{
		{GID: gid("gone"), Prepared: now - th},
		{GID: gid("old"), Prepared: now - stuck},
		{GID: gid("young"), Prepared: now - stuck + 1 + opts.Period.Milliseconds()},
	}
	f.round(xacts, nil, false)
	got := f.reasons()
	require.Equal(t, map[string]indoubt.Reason{
		"coordinator/gone": indoubt.ReasonGone,
		"coordinator/old":  indoubt.ReasonStuck,
	}, got, "alerts raised at t=%d without a roster: %v", f.now, slices.Sorted(maps.Keys(got)))
}

// TestAlertTakesTheOrphanReasonOfAnyBranch: a transaction's branches are judged one by
// one, and its coordinator's alert says restarted when any branch was prepared before the
// coordinator restarted, even if another branch, prepared by the new process, is merely
// stuck: PgDog's new process will not finish the first, so the operator must. The reason
// does not depend on which branch is read first. Found by the CrossShardCommit
// model's replay at 150 runs (spec/crossshard_replay_test.go, run 136): the monitor said
// stuck, the model orphan.
func TestAlertTakesTheOrphanReasonOfAnyBranch(t *testing.T) {
	const now = 1_000_000
	opts := indoubt.Options{Period: time.Second, Threshold: 5 * time.Second} // StuckAfter 10 s
	th := opts.Threshold.Milliseconds()
	for _, shards := range [][2]string{{"0", "1"}, {"1", "0"}} {
		before := indoubt.Xact{GID: indoubt.GIDPrefix + "c_1_" + shards[0], Prepared: now - 4*th}  // before the restart
		after := indoubt.Xact{GID: indoubt.GIDPrefix + "c_1_" + shards[1], Prepared: now - 5*th/2} // by the new process, past StuckAfter
		procs := []indoubt.Process{{ID: "c", Started: now - 3*th}}
		f := newFixture(opts, now)
		f.round([]indoubt.Xact{before, after}, procs, false)
		require.Equal(t, map[string]indoubt.Reason{"coordinator/c": indoubt.ReasonRestarted}, f.reasons(), "the older branch is %s", before.GID)
	}
}
