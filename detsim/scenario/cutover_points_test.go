package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/scenario"
)

// sweepForced runs seeds 1..n of sc with mutant and the points forced as force says, and
// returns how many runs tripped inv and how many reached probe.
func sweepForced(sc detsim.Scenario, mutant string, force []detsim.FaultSetting, n int, inv, probe string) (tripped, reached int) {
	for seed := uint64(1); seed <= uint64(n); seed++ {
		r := sc.Run(seed, detsim.RunOptions{Mutant: mutant, Force: force})
		if r.Violation != nil && r.Violation.Invariant == inv {
			tripped++
		}
		if r.Probes[probe] > 0 {
			reached++
		}
	}
	return tripped, reached
}

func forced(prob float64, points ...string) []detsim.FaultSetting {
	out := make([]detsim.FaultSetting, len(points))
	for i, p := range points {
		out[i] = detsim.FaultSetting{Point: p, Prob: prob}
	}
	return out
}

// TestCutoverWindowPointsMatter: each window point of the cutover scenario (issue 20 item
// 4), forced on over a few seeds, opens the window it is for: a named mutant trips its
// invariant there, or the window's probe fires, and forced off neither happens on the same
// seeds. The swarm draws the other points as each seed says.
func TestCutoverWindowPointsMatter(t *testing.T) {
	if scenario.MutantBuild {
		t.Skip("skipped: this build bakes a mutant into a machine (run only TestMutants with its tag)")
	}
	if raceEnabled {
		t.Skip("skipped: the sweeps run in the build without -race (go test ./detsim/...)")
	}
	sc := scenario.Cutover
	t.Run("backend.fence.fail_slow+ctl.reply.late", func(t *testing.T) {
		// One shard's fence failing for good rolls the cutover back while a source shard's
		// slow Fence may be out; a late answer of its timed-out first attempt, taken for the
		// retry's by RetryReusesStep, lets the rollback unfence it before the retry lands:
		// the instances resume onto a fenced source shard. Both points are needed.
		late := detsim.FaultSetting{Point: "ctl.reply.late", Prob: 0.5}
		fence := func(p float64) []detsim.FaultSetting {
			return append(forced(p, "backend.fence.fail_slow"), late)
		}
		on, rolledBack := sweepForced(sc, scenario.MutantRetryReusesStep, fence(1), 150, "released-writable", "fence.fail_slow.rolled_back")
		require.Positive(t, on, "RetryReusesStep never tripped released-writable with the fence point on")
		require.Greater(t, rolledBack, 100, "the fence stage rolled back in %d of 150 runs", rolledBack)
		off, _ := sweepForced(sc, scenario.MutantRetryReusesStep, fence(0), 150, "released-writable", "")
		require.Zero(t, off)
		noLate, _ := sweepForced(sc, scenario.MutantRetryReusesStep,
			append(forced(1, "backend.fence.fail_slow"), detsim.FaultSetting{Point: "ctl.reply.late"}), 150, "released-writable", "")
		require.Zero(t, noLate, "without late answers the retry's own answer settles it")
		t.Logf("RetryReusesStep tripped released-writable in %d of 150 seeds with the points on, 0 with either off", on)
	})
	t.Run("pgdog.held", func(t *testing.T) {
		// The missed instance's statements held on their way to the source: without the
		// grace (NoGrace) one lands after finalize opened the source and the reverse stream
		// stopped.
		on, missed := sweepForced(sc, scenario.MutantNoGrace, forced(1, "pgdog.held"), 100, "no-lost-ack", "held.missed")
		require.Positive(t, on, "NoGrace never tripped no-lost-ack with pgdog.held on")
		require.Greater(t, missed, 50)
		off, _ := sweepForced(sc, scenario.MutantNoGrace, forced(0, "pgdog.held"), 100, "no-lost-ack", "held.missed")
		require.Zero(t, off)
		t.Logf("NoGrace tripped no-lost-ack in %d of 100 seeds with pgdog.held on, %d off", on, off)
	})
	t.Run("writes.heavy", func(t *testing.T) {
		// The burst shows as a lag over the threshold on polls of a replicating copy (the
		// catch-up gate holds the machine), which the swarm's faults otherwise never show;
		// and more acknowledged writes are in flight when a mutant loses them.
		_, gated := sweepForced(sc, "", forced(1, "writes.heavy"), 100, "", "cutover.lag.gated")
		_, gatedOff := sweepForced(sc, "", forced(0, "writes.heavy"), 100, "", "cutover.lag.gated")
		require.Positive(t, gated)
		require.Zero(t, gatedOff)
		on, _ := sweepForced(sc, scenario.MutantPublishBeforeCutover, forced(1, "writes.heavy"), 150, "no-lost-ack", "")
		off, _ := sweepForced(sc, scenario.MutantPublishBeforeCutover, forced(0, "writes.heavy"), 150, "no-lost-ack", "")
		require.Greater(t, on, off, "PublishBeforeCutover trips no-lost-ack in %d of 150 seeds with writes.heavy on, %d off", on, off)
		t.Logf("lag gated in %d of 100 runs (0 off); PublishBeforeCutover no-lost-ack %d vs %d of 150", gated, on, off)
	})
	t.Run("correct", func(t *testing.T) {
		// The correct machine keeps every invariant with each point on.
		for _, p := range []string{"backend.fence.fail_slow", "pgdog.held", "writes.heavy", "ctl.reply.late"} {
			for seed := uint64(1); seed <= 60; seed++ {
				r := sc.Run(seed, detsim.RunOptions{Force: forced(1, p)})
				require.Nil(t, r.Violation, "%s on, seed %d", p, seed)
			}
		}
	})
}

// TestVReshardHeavyWritesPoint: writes.heavy forced on gives every seed the heavy writes
// (param heavy_writes), so the MaxLagMs gate's mutant trips on each; forced off only the
// seeds that draw heavy_writes=1 do.
func TestVReshardHeavyWritesPoint(t *testing.T) {
	if scenario.MutantBuild || raceEnabled {
		t.Skip("skipped: runs in the normal build without -race")
	}
	on, waited := sweepForced(scenario.VReshard, scenario.MutantVReshardIgnoreLag, forced(1, "writes.heavy"), 40, check.InvVReshardWriteStop, "vreshard.lag_wait")
	off, _ := sweepForced(scenario.VReshard, scenario.MutantVReshardIgnoreLag, forced(0, "writes.heavy"), 40, check.InvVReshardWriteStop, "")
	require.Equal(t, 40, on)
	require.Equal(t, 40, waited)
	require.Less(t, off, 40)
	require.Positive(t, off)
}
