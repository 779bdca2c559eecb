package cutover_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/cutover"
)

// restartWithCopyInFlight restarts the daemon right after it sent COPY_DATA, the command
// having run (its answer lost): the restart lists d's tasks to adopt the copy. setup
// shapes the world; deliver, when set, sees every command first (see worldRun).
func restartWithCopyInFlight(t *testing.T, mu cutover.Mutants, setup func(*world), deliver func(*world, cutover.Command, func(cutover.Input)) bool) (cutover.Done, []string, map[string]bool) {
	t.Helper()
	done, violations, _, actions := reliableWith(t, worldRun{decision: cutover.Finalize{}, restartAt: 2, applied: true,
		mutants: mu, setup: setup, deliver: deliver})
	return done, violations, actions
}

// TestAdoptsOnlyItsCopy is the necessity world of adopting only the task that names this
// cutover's copy: another database's copy starts on d right after this one's, so the
// restart's listing shows it beside the copy, newer (PgDog lists every database's tasks
// together). Adopting the newest active task (AdoptAnyTask) cuts that one over and
// publishes g+1 while this database's CUTOVER never ran.
func TestAdoptsOnlyItsCopy(t *testing.T) {
	other := func(w *world) { w.otherDB, w.otherEarly = true, true }
	done, violations, actions := restartWithCopyInFlight(t, cutover.Mutants{}, other, nil)
	require.Empty(t, violations)
	require.True(t, actions["Adopt"], "the restart adopts the copy")
	require.Equal(t, cutover.Finalized, done.Outcome)

	_, violations, _ = restartWithCopyInFlight(t, cutover.Mutants{AdoptAnyTask: true}, other, nil)
	v := strings.Join(violations, "\n")
	require.Contains(t, v, "cuts over another database's task")
	require.Contains(t, v, "published before CUTOVER took effect")
}

// TestAdoptRefusesWhenItCannotTell: when the listing cannot say which task is the copy,
// the restart neither adopts one nor sends COPY_DATA again (a second copy into the same
// destination): it rolls back with an Alert naming what may be left running, stopping
// nothing. The listing shows a second active task naming the same copy (twin), or gives
// no task's type (unnamed).
func TestAdoptRefusesWhenItCannotTell(t *testing.T) {
	for _, name := range []string{"twin", "unnamed"} {
		t.Run(name, func(t *testing.T) {
			copies, polls, alerted := 0, 0, false
			done, violations, _ := restartWithCopyInFlight(t, cutover.Mutants{}, nil,
				func(w *world, c cutover.Command, _ func(cutover.Input)) bool {
					switch c := c.(type) {
					case cutover.ListTasks:
						if strings.Contains(c.Step, "/copy/adopt") && name == "twin" {
							w.tasks[42], w.kinds[42] = cutover.TaskSyncing, "reshard app -> app__reshard_4"
						} else if strings.Contains(c.Step, "/copy/adopt") {
							clear(w.kinds)
						}
					case cutover.CopyData:
						copies++
					case cutover.PollCopy:
						polls++
					}
					alerted = alerted || w.alerts > 0
					return false
				})
			require.Empty(t, violations)
			require.Equal(t, 0, polls, "no task adopted")
			require.Equal(t, 0, copies, "COPY_DATA not sent again after the restart")
			require.Equal(t, cutover.RolledBack, done.Outcome)
			require.Contains(t, done.Reason, "provably this cutover's copy")
			// The reason says which: the tasks that name the copy, or those that may be it.
			if name == "twin" {
				require.Contains(t, done.Reason, "(tasks copying app into app__reshard_4: 0 (syncing), 42 (syncing))")
			} else {
				require.Contains(t, done.Reason, `(no task names the copy of app into app__reshard_4, but these may be it: 0 ("", syncing))`)
			}
			require.True(t, alerted)
		})
	}
}

// TestAdoptAmongOtherCopies runs hostile worlds where another database's copy starts right
// after this one's: without the mutant no seed breaks an invariant, and some seed restarts
// with COPY_DATA in flight and adopts.
func TestAdoptAmongOtherCopies(t *testing.T) {
	adopted := 0
	for seed := range uint64(300) {
		cfg := runConfig{instances: 3, attempts: 2, chaos: 200, finalize: int(seed % 3), otherDB: true, otherEarly: true}
		res := run(rngChooser{rand.New(rand.NewPCG(seed, 5))}, cfg)
		require.Empty(t, res.violations, "seed %d\n%s", seed, strings.Join(res.log, "\n"))
		if slices.ContainsFunc(res.log, func(l string) bool { return strings.Contains(l, "/copy/adopt") }) {
			adopted++
		}
	}
	t.Logf("%d of 300 seeds listed d's tasks to adopt the copy", adopted)
	require.NotZero(t, adopted)
}

// TestStreamIsTheCutoversOwn is the necessity world of taking for the reverse stream only a
// task that names this copy's databases: another database's copy starts on d at the forward
// CUTOVER, so the listing that resolves it shows that copy newer than the stream the
// CUTOVER started. Taken for the stream (StreamOfAnyDatabase), it is stopped at finalize, or
// cut over by a Reverse; the machine takes its own stream, and stops or reverses that.
func TestStreamIsTheCutoversOwn(t *testing.T) {
	other := func(w *world) { w.otherLate = true }
	for _, decision := range []cutover.Input{cutover.Finalize{}, cutover.Reverse{}} {
		done, violations, _, _ := reliableWith(t, worldRun{decision: decision, setup: other})
		require.Empty(t, violations, "%T", decision)
		require.Contains(t, []cutover.Outcome{cutover.Finalized, cutover.Reversed}, done.Outcome, "%T", decision)

		_, violations, _, _ = reliableWith(t, worldRun{decision: decision, setup: other, mutants: cutover.Mutants{StreamOfAnyDatabase: true}})
		require.Contains(t, strings.Join(violations, "\n"), "another database's", "%T", decision)
	}
}

// TestStreamNamedOtherwiseIsNotTheCutovers: the stream a CUTOVER started is named by this
// copy's two databases, either way round (mayBeStream, StreamOf); another database's stream
// started on d at the forward CUTOVER, newer than this one's, whose type names only one of
// them (or one of them twice) is not it. Taken for it, finalize stops it ("stops another
// database's replication task") or a reverse cuts it over ("cuts over another database's
// task"). Each name differs from this copy's in one database only, so each half of the
// match is needed.
func TestStreamNamedOtherwiseIsNotTheCutovers(t *testing.T) {
	db, dst := "app", "app__reshard_4" // fixture(): database app at generation 4
	for _, kind := range []string{
		"replication " + db + " -> zzz",
		"replication zzz -> " + dst,
		"replication " + dst + " -> zzz",
		"replication zzz -> " + db,
		"replication " + db + " -> " + db + " (reverse)",
		"replication " + dst + " -> " + dst + " (reverse)",
		"replication " + db + " -> " + dst + "x (reverse)",
	} {
		setup := func(w *world) { w.otherLate, w.otherKind = true, kind }
		for _, decision := range []cutover.Input{cutover.Finalize{}, cutover.Reverse{}} {
			done, violations, _, _ := reliableWith(t, worldRun{decision: decision, setup: setup})
			require.Empty(t, violations, "%q, %T", kind, decision)
			require.Contains(t, []cutover.Outcome{cutover.Finalized, cutover.Reversed}, done.Outcome, "%q, %T", kind, decision)
		}
	}
	// The world does tell: the same names taken for the stream trip it.
	for _, kind := range []string{"replication " + dst + " -> zzz", "replication zzz -> " + db} {
		setup := func(w *world) { w.otherLate, w.otherKind = true, kind }
		_, violations, _, _ := reliableWith(t, worldRun{decision: cutover.Finalize{}, setup: setup, mutants: cutover.Mutants{StreamOfAnyDatabase: true}})
		require.Contains(t, strings.Join(violations, "\n"), "another database's", "%q", kind)
	}
}

// TestStreamByItsIDWhenTypesAreUnknown: when the lister says nothing of a task's type (Kind
// "", mayBeStream lets every task through), the stream a CUTOVER started is told by its id
// alone: newer than the task the CUTOVER cut, and the newest such. Another database's
// replication task runs on d, older than the copy or started between the copy and the
// CUTOVER; taken for the stream, finalize stops it or a reverse cuts it over. Both where the
// CUTOVER's resolve learns the stream and where its listing failed and the check after the
// resume learns it.
func TestStreamByItsIDWhenTypesAreUnknown(t *testing.T) {
	for name, setup := range map[string]func(*world){
		"older":   func(w *world) { w.noKinds = true; w.startOther(cutover.TaskReplicating) },
		"between": func(w *world) { w.noKinds, w.otherDB = true, true },
	} {
		for _, failing := range []string{"", "*/resolve/*"} {
			for _, decision := range []cutover.Input{cutover.Finalize{}, cutover.Reverse{}} {
				var w0 *world
				done, violations, _, _ := reliableWith(t, worldRun{decision: decision, failing: failing,
					setup: func(w *world) { w0 = w; setup(w) }})
				require.Empty(t, violations, "%s, failing %q, %T", name, failing, decision)
				require.Contains(t, []cutover.Outcome{cutover.Finalized, cutover.Reversed}, done.Outcome, "%s, failing %q, %T: %s", name, failing, decision, done.Reason)
				require.NotEqual(t, noTask, w0.otherTask, "%s: the other database's task ran", name)
			}
		}
	}
}

// TestAdoptsItsCopyInEitherLiveState: the copy a restart finds may have moved on while no
// process ran: the sole task naming it is adopted whether it still syncs or replicates
// already (no second COPY_DATA, the catch-up polls it), and refused in any other active
// state (cutting over, stopping, unknown: not a copy this cutover can go on with), rolling
// back as when it cannot tell.
func TestAdoptsItsCopyInEitherLiveState(t *testing.T) {
	for _, st := range []cutover.TaskState{cutover.TaskSyncing, cutover.TaskReplicating, cutover.TaskCuttingOver, cutover.TaskStopping, cutover.TaskUnknown} {
		copies, polls := 0, 0
		done, violations, actions := restartWithCopyInFlight(t, cutover.Mutants{}, nil,
			func(w *world, c cutover.Command, _ func(cutover.Input)) bool {
				switch c := c.(type) {
				case cutover.ListTasks:
					if strings.Contains(c.Step, "/copy/adopt") {
						w.tasks[w.copyTask] = st
					}
				case cutover.CopyData:
					copies++
				case cutover.PollCopy:
					polls++
				}
				return false
			})
		require.Empty(t, violations, "%v", st)
		require.Equal(t, 0, copies, "%v: COPY_DATA not sent again after the restart", st)
		if st == cutover.TaskSyncing || st == cutover.TaskReplicating {
			require.True(t, actions["Adopt"], "%v: the restart adopts the copy", st)
			require.Positive(t, polls, "%v", st)
			require.Equal(t, cutover.Finalized, done.Outcome, "%v: %s", st, done.Reason)
			continue
		}
		require.Equal(t, 0, polls, "%v: no task adopted", st)
		require.Equal(t, cutover.RolledBack, done.Outcome, "%v", st)
		require.Contains(t, done.Reason, "provably this cutover's copy", "%v", st)
	}
}
