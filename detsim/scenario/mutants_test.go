package scenario_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/scenario"
	"loam.dev/router/detsim/simtest"
)

// mutant is a deliberate bug and the invariant it must trip within Bound seeds.
type mutant struct {
	Scenario, Mutant, Invariant string
	Bound                       int
}

// mutants lists every invariant with the named mutant that shows it is not vacuous.
var mutants = []mutant{
	{"traffic", scenario.MutantAckEarly, "no-lost-ack", 500},
	{"bank", scenario.MutantAckEarly, "conservation", 500},
	{"push", scenario.MutantPushUnpublished, "files-only-published", 100},
	{"push", scenario.MutantRegressUnchecked, "generations-increase", 100},
	{"push", scenario.MutantNoReconcile, "converges", 500},
	{"push", scenario.MutantNoStrayWait, "push-one-write", 500},
	{"push", scenario.MutantReloadEarly, check.InvReloadAfterFiles, 500},
	{"push", scenario.MutantSilentGiveUp, check.InvPushEnds, 500},
	{"push-kubernetes", scenario.MutantSeenAny, check.InvReloadAfterSeen, 200},
	{"push-kubernetes", scenario.MutantConfirmOnReload, check.InvConfirmedLoaded, 200},
	{"bank", scenario.MutantCommitEarly, "2pc-atomic", 100},
	{"bank", scenario.MutantAlertsDropped, "indoubt-alerts", 2000},
	{"bank", scenario.MutantThresholdWrongUnit, check.InvNoEarlyAlert, 300},
	{"bank", scenario.MutantResendAcked, check.InvDecideOnce, 300},
	{"bank", scenario.MutantGroupByShard, check.InvAlertNames, 300},
	{"cutover", scenario.MutantSkipFence, "one-side-serves", 100},
	{"cutover", scenario.MutantSkipFence, "list-append-si", 3000},
	{"cutover", scenario.MutantUnfencedDestination, "no-lost-ack", 1000},
	{"cutover", scenario.MutantPublishBeforeCutover, "no-lost-ack", 3000},
	{"cutover", scenario.MutantResumeBeforePublish, "released-writable", 200},
	{"cutover", scenario.MutantFilesBeforePublish, "files-only-published", 50},
	{"cutover", scenario.MutantReverseReusesGeneration, "converges", 200},
	{"cutover", scenario.MutantAckEarly, "no-lost-ack", 3000},
	// The cutover's step invariants, shared with the machine's world test (check.Publish,
	// check.Resume): over seeds 1..300 they caught 185 runs of PublishBeforeCutover, 87 of
	// ResumeBeforePublish and 21 of SkipFence that no other checker of the scenario did
	// (which caught 11, 69 and 143); the first at seeds 1, 2 and 25.
	{"cutover", scenario.MutantSkipFence, check.InvPublishFenced, 300},
	{"cutover", scenario.MutantPublishBeforeCutover, check.InvPublishAfterCutover, 50},
	{"cutover", scenario.MutantResumeBeforePublish, check.InvResumeOpen, 50},
	// Done's false alarms (check.Claims, shared with the world test): an instance whose
	// RESUME needed a retry named unresumed; 12 of seeds 1..300, the first at 13.
	{"cutover", scenario.MutantUnresumedOnRetry, check.InvClaims, 200},
	{"cutover", scenario.MutantLeakyFence, "no-phantom", 3000},
	// A CUTOVER that lands after the machine gave up on it swaps the designated instance
	// again; with the destination unfenced by the rollback its writes go where no stream
	// carries them (issue 20: 3 of seeds 1..4000 tripped it, the first at 2646 when this
	// was written; 1365 just before the window points joined the cutover's swarm, 222 after,
	// 2031 since the drain's reads became calls of their own).
	{"cutover", scenario.MutantOpenDestinationOnRollback, "no-lost-ack", 3000},
	{"cutover", scenario.MutantOpenDestinationOnRollback, check.InvFencesAtDone, 300},
	// The cutover's protections shown necessary by a world that opens their window every
	// run (cutover_worlds.go, issue 20): the catch-up lag threshold (a stream of finite
	// throughput and a burst of writes: without it CUTOVER cannot drain within PgDog's
	// cutover_timeout and the cutover rolls back), the grace (an instance the pause missed
	// with statements still travelling when the source opens), the rollback's reload of d
	// (after a CUTOVER that swapped and failed), the check after the resume and finalize's
	// reload of d (d restarting right after its CUTOVER, its SHOW TASKS failing or not).
	{"cutover-drain", scenario.MutantNoLagThreshold, scenario.InvCutoverAsDecided, 50},
	// Caught up only once the copy task replicates: the model shows the copy's slot lag
	// while it syncs, under the threshold, and a CUTOVER of the syncing task is refused.
	{"cutover-drain", scenario.MutantCatchUpWhileSyncing, scenario.InvCutoverAsDecided, 50},
	// The drain before CUTOVER, where PgDog's CUTOVER swaps on a stale lag (as 9918e963
	// did under load): without it the writes the stream had not applied are lost.
	{"cutover-drain", scenario.MutantSkipDrain, "no-lost-ack", 50},
	{"cutover-windows", scenario.MutantNoGrace, "no-lost-ack", 300},
	{"cutover-windows", scenario.MutantGraceFromSnapshot, "no-lost-ack", 1000},
	{"cutover-windows", scenario.MutantSkipDesignatedReload, check.InvDesignatedWritable, 100},
	{"cutover-windows", scenario.MutantSkipCheck, check.InvDesignatedWritable, 100},
	{"cutover-windows", scenario.MutantSkipFinalReload, "no-lost-ack", 200},
	// The rollback's Unfence retried until it succeeds: a destination shard's fence failing
	// for good rolls the cutover back, and a source shard refuses the rollback's Unfence
	// more times than Attempts before it takes it; given up, the instances resume onto it
	// fenced.
	{"cutover-undo", scenario.MutantUndoUnfenceGivesUp, "released-writable", 50},
	// Finalize's STOP_TASK retried until it succeeds: a rolled-back reverse's CUTOVER still
	// on its way, d refusing the STOP_TASK more times than Attempts; given up, the landing
	// after Done takes the running stream and d routes the application nowhere.
	{"cutover-late-reverse", scenario.MutantStopGivesUp, "converges", 50},
	// The cutover scenario's window points (issue 20 item 4) open those windows in the
	// swarm's runs too: a fence failing for good beside a slow one, with answers of earlier
	// attempts fed again late (backend.fence.fail_slow, ctl.reply.late: a timed-out Fence's
	// answer taken for its retry's lets the rollback unfence the shard before the retry
	// lands, and the instances resume onto it fenced), and an instance the pause missed
	// with its statements held (pgdog.held). TestCutoverWindowPointsMatter forces each on.
	{"cutover", scenario.MutantRetryReusesStep, "released-writable", 1000},
	{"cutover", scenario.MutantRetryReusesStep, check.InvRetryAlert, 1000},
	{"cutover", scenario.MutantNoGrace, "no-lost-ack", 300},
	// Reverse refused when no reverse stream is known (d restarted after its CUTOVER):
	// carried out, it pauses and fences for a reverse CUTOVER the listing cannot settle.
	{"cutover", scenario.MutantReverseWithoutStream, "converges", 300},
	// The seed 002 table (M1–M5, each tripping the invariant the seed names), M4's early
	// door, the daemon that does not resume after a restart, and the daemon that learns the
	// fleet from the pods' reports (the simulator's finding, fixed in loamrouter by
	// fencing.pods): over 20 base seeds it trips T1 within 1–35 seeds and T2 within 2–87.
	{"fencing", scenario.MutantM1, check.InvT1, 200},
	{"fencing", scenario.MutantM2, check.InvT1, 500},
	{"fencing", scenario.MutantM3, check.InvT2, 200},
	{"fencing", scenario.MutantM4, check.InvT1, 500},
	{"fencing", scenario.MutantM4, check.InvT3, 2000},
	{"fencing", scenario.MutantM5, check.InvT2, 500},
	{"fencing", scenario.MutantFencingNoResume, "converges", 1000},
	{"fencing", scenario.MutantRosterFromReports, check.InvT1, 100},
	{"fencing", scenario.MutantRosterFromReports, check.InvT2, 300},
	// The failover machine's mutants (failover.Mutants) and the asynchronous standby.
	{"failover", scenario.MutantFailoverSkipFence, check.InvOneWritable, 100},
	{"failover", scenario.MutantRecordBeforeReparent, check.InvMirrorsVitess, 50},
	{"failover", scenario.MutantPushBeforeRecord, "files-only-published", 100},
	{"failover", scenario.MutantKeepGeneration, "converges", 100},
	{"failover", scenario.MutantStandbyAsync, "no-lost-ack", 200},
	{"failover", scenario.MutantClaimFenced, check.InvFailoverDone, 200},
	// machine/vreshard's mutants (vreshard.Mutants).
	{"vreshard", scenario.MutantVReshardSkipVDiff, check.InvVReshardVDiff, 50},
	{"vreshard", scenario.MutantVReshardSkipMirror, check.InvVReshardMirror, 50},
	{"vreshard", scenario.MutantVReshardForgetSent, check.InvVReshardOnce, 100},
	{"vreshard", scenario.MutantVReshardSkipHold, check.InvVReshardHold, 50},
	{"vreshard", scenario.MutantVReshardSkipVerify, check.InvVReshardVerified, 50},
	{"vreshard", scenario.MutantVReshardRewriteSame, check.InvVReshardRecordChanges, 50},
	// The MaxLagMs gate: under heavy writes, without it the writes stop for what the
	// target still lags by when they switch.
	{"vreshard", scenario.MutantVReshardIgnoreLag, check.InvVReshardWriteStop, 50},
	// Causal reads (issue 20): the selector that ignores the requirement, the monitor that
	// stamps a poll late, the selector that never wakes a waiting read.
	{"causal", scenario.MutantCausalIgnoreRequirement, check.InvCausalRead, 200},
	{"causal", scenario.MutantCausalSentAtReply, check.InvCausalRead, 1000},
	{"causal", scenario.MutantCausalNoWake, "converges", 50},
}

// cutoverAwaitingAWorld are the cutover's protections (issue 20 item 1) whose removal no
// invariant of the simulator notices: each is declared in the scenario, so -mutant replays
// it, and has its necessity world in the machine's world model.
var cutoverAwaitingAWorld = map[string]string{
	scenario.MutantStaleReverseTrusted: "the world model trips it (TestStaleReverseCutAbandoned: a reverse CUTOVER landing " +
		"after its reverse rolled back, then a second Reverse: 'acknowledged writes lost'); 1000 seeds of each cutover " +
		"scenario met no such reverse",
	scenario.MutantResolveRenumbers: "the world model trips it (TestResolveListingsNumberedAcrossTries: the first CUTOVER " +
		"try's listing answering again while the second's is out, a CUTOVER that took rolled back); the simulator checks " +
		"no needless rollback outside cutover-drain, whose network has no faults to repeat an answer",
	scenario.MutantNoCatchUpDeadline: "the world model trips it (TestCatchUpDeadlineEndsAStuckCopy: a stream slower than the " +
		"writes, the copy polled for ever, 'no Done after the world turned reliable'); the simulator's streams always catch " +
		"up once the writes stop (300 seeds of cutover: nothing tripped)",
	scenario.MutantAnyNewerStreamTakes: "the world model trips it (TestOtherDatabasesStreamIsNotTheCutovers: another database's " +
		"replication task on d, listed beside the copy, is taken for the reverse stream of a CUTOVER that did not take: " +
		"'published before CUTOVER took effect'); the simulator's instances serve one database and run no task of another",
	scenario.MutantAdoptAnyTask: "the world model trips it (TestAdoptsOnlyItsCopy, TestMutantsTripInvariants AdoptAnyTask: " +
		"another database's copy on d, listed beside this one's after a restart with COPY_DATA in flight, is adopted and " +
		"cut over: 'cuts over another database's task', 'published before CUTOVER took effect'); the simulator's " +
		"instances serve one database and run no task of another",
}

// TestCutoverAwaitingAWorldDeclared keeps the list above replayable and out of the
// mutant table (a mutant caught belongs in mutants).
func TestCutoverAwaitingAWorldDeclared(t *testing.T) {
	sc, _ := scenario.ByName("cutover")
	for name := range cutoverAwaitingAWorld {
		require.Contains(t, sc.Mutants, name)
		require.False(t, slices.ContainsFunc(mutants, func(m mutant) bool { return m.Mutant == name }), "%s is caught now: move it to mutants", name)
	}
}

// firstTrip runs seeds from base until one trips want; it returns the result and how many
// seeds it took, or false.
func firstTrip(sc detsim.Scenario, m mutant, base uint64) (detsim.Result, int, bool) {
	for i := range m.Bound {
		r := sc.Run(base+uint64(i), detsim.RunOptions{Mutant: m.Mutant})
		if r.Violation != nil && r.Violation.Invariant == m.Invariant {
			return r, i + 1, true
		}
	}
	return detsim.Result{}, 0, false
}

// TestMutants: each mutant trips its invariant within its bound, the failure shrinks, and
// the shrunk schedule replays the same violation from its text alone.
func TestMutants(t *testing.T) {
	if raceEnabled {
		t.Skip("skipped: the mutant sweeps run in the build without -race (go test ./detsim/...)")
	}
	for _, m := range append(mutants, taggedMutants...) {
		t.Run(m.Scenario+"/"+m.Mutant, func(t *testing.T) {
			if scenario.MutantBuild && !slices.ContainsFunc(taggedMutants, func(x mutant) bool { return x == m }) {
				t.Skip("skipped: this build bakes a mutant into a machine; the other mutants run in the normal build")
			}
			sc, ok := scenario.ByName(m.Scenario)
			require.True(t, ok)
			require.Contains(t, sc.Mutants, m.Mutant)
			r, n, ok := firstTrip(sc, m, 1)
			require.True(t, ok, "mutant %s never tripped %s in %d seeds", m.Mutant, m.Invariant, m.Bound)
			sh := sc.Shrink(r, 2000)
			sched, err := detsim.ParseSchedule(sh.Schedule.String())
			require.NoError(t, err)
			again := sc.Run(r.Seed, detsim.RunOptions{Mutant: m.Mutant, Schedule: sched})
			require.NotNil(t, again.Violation)
			require.Equal(t, m.Invariant, again.Violation.Invariant)
			require.Equal(t, sh.Result.Hash, again.Hash, "the printed schedule replays exactly")
			t.Logf("%s: tripped %s at seed %d (%d seeds), shrunk %d faults + %d ops to %s (%d replays)",
				m.Mutant, m.Invariant, r.Seed, n, sh.FromFaults, sh.FromOps, sh.Schedule, sh.Runs)
		})
	}
}

// TestEveryInvariantHasAMutant: every invariant a checker can report appears in the mutant
// table (the step budget is a harness limit, not an invariant).
func TestEveryInvariantHasAMutant(t *testing.T) {
	have := map[string]bool{}
	for _, m := range append(mutants, taggedMutantsAllBuilds...) {
		have[m.Invariant] = true
	}
	for _, inv := range checkedInvariants {
		require.True(t, have[inv.name] || inv.awaits != "", "invariant %s has no mutant that trips it", inv.name)
		if inv.awaits != "" {
			require.False(t, have[inv.name], "invariant %s has a mutant now: remove its 'awaits' note", inv.name)
		}
	}
}

// checkedInvariants is every invariant the checkers report. awaits names what a mutant for
// it needs that has not landed yet (the machine whose mutant trips it); the test above keeps
// the list honest both ways.
var checkedInvariants = []struct{ name, awaits string }{
	{"no-lost-ack", ""},
	{"conservation", ""},
	{"no-phantom", ""},
	{"list-append-si", ""},
	{"one-side-serves", ""},
	{"released-writable", ""},
	{"2pc-atomic", ""},
	{"indoubt-never-resolves", ""},
	{"indoubt-alerts", ""},
	{"generations-increase", ""},
	{"files-only-published", ""},
	{"converges", ""},
	{check.InvPublishFenced, ""},
	{check.InvPublishAfterCutover, ""},
	{check.InvResumeOpen, ""},
	{check.InvClaims, ""},
	{check.InvT1, ""},
	{check.InvT2, ""},
	{check.InvT3, ""},
	{check.InvOneWritable, ""},
	{check.InvMirrorsVitess, ""},
	{check.InvVReshardOnce, ""},
	{check.InvVReshardVDiff, ""},
	{check.InvVReshardMirror, ""},
	{check.InvVReshardWriteStop, ""},
	{check.InvVReshardHold, ""},
	{check.InvVReshardVerified, ""},
	{check.InvVReshardRecordChanges, ""},
	{check.InvOneWrite, ""},
	{check.InvReloadAfterFiles, ""},
	{check.InvPushEnds, ""},
	{check.InvReloadAfterSeen, ""},
	{check.InvConfirmedLoaded, ""},
	{check.InvDecideOnce, ""},
	{check.InvAlertNames, ""},
	{check.InvFencesAtDone, ""},
	{check.InvFailoverDone, ""},
	{check.InvRetryAlert, ""},
	{check.InvCausalRead, ""},
	{check.InvNoEarlyAlert, ""},
	{check.InvDesignatedWritable, ""},
	{scenario.InvCutoverAsDecided, ""},
}

// TestMutantFigures prints, per mutant, the median number of seeds to trip it over 20 base
// seeds and the median shrunk schedule length. Set SIM_FIGURES=1 to run it, and
// SIM_FIGURES_SCENARIO=<name> to measure one scenario's mutants only.
func TestMutantFigures(t *testing.T) {
	if scenario.MutantBuild {
		t.Skip("skipped: the figures of the normal build's mutants run in it")
	}
	if os.Getenv("SIM_FIGURES") == "" {
		t.Skip("skipped: set SIM_FIGURES=1 to measure the mutant figures")
	}
	var out strings.Builder
	fmt.Fprintf(&out, "%-9s %-34s %-22s %-14s %s\n", "scenario", "mutant", "invariant", "seeds-to-trip", "shrunk length (medians over 20 base seeds)")
	only := os.Getenv("SIM_FIGURES_SCENARIO")
	for _, m := range append(mutants, taggedMutants...) {
		if only != "" && m.Scenario != only {
			continue
		}
		sc, _ := scenario.ByName(m.Scenario)
		var seeds, lens []int
		for k := range 20 {
			base := uint64(k+1) * 1_000_003
			r, n, ok := firstTrip(sc, m, base)
			if !ok {
				seeds = append(seeds, m.Bound+1)
				continue
			}
			seeds = append(seeds, n)
			sh := sc.Shrink(r, 2000)
			lens = append(lens, sh.Length())
		}
		fmt.Fprintf(&out, "%-9s %-34s %-22s %-14d %d\n", m.Scenario, m.Mutant, m.Invariant, median(seeds), median(lens))
	}
	t.Log("\n" + out.String())
}

func median(xs []int) int {
	if len(xs) == 0 {
		return -1
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

var _ = simtest.Seed
