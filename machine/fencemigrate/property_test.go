package fencemigrate_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// chooser draws bounded integers; rapid.T (for shrinking) and a seeded rng both provide it.
type chooser func(n int, label string) int

func rapidChooser(t *rapid.T) chooser {
	return func(n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) }
}

func rngChooser(seed uint64) chooser {
	r := rand.New(rand.NewPCG(seed, 1))
	return func(n int, _ string) int { return r.IntN(n) }
}

// genInputs builds a random input sequence biased towards the useful: replies and timers
// answer the most recent command of their kind, confirmations usually echo the token.
type env struct {
	m        *fencemigrate.Machine
	now      int64
	rec      machine.Recorder
	lastStep map[string]string // kind -> step/token/timer id of the latest command
}

var pods = []string{"p1", "p2", "p3"}

func (e *env) next(c chooser) fencemigrate.Input {
	switch c(11, "kind") {
	case 0, 1, 2:
		v := e.m.Allowed() // mostly what the deploy system was told; sometimes anything
		if c(5, "stray") == 0 {
			v = fencing.Version(c(4, "v"))
		}
		return fencemigrate.PodReported{Pod: pods[c(len(pods), "pod")], Version: v}
	case 3:
		to := min(e.m.Allowed()+1, fencing.C)
		if c(5, "skip") == 0 {
			to = fencing.Version(c(4, "to"))
		}
		return fencemigrate.Advance{To: to}
	case 4:
		return fencemigrate.StartBackfill{}
	case 5:
		var err error
		if c(4, "fail") == 0 {
			err = errors.New("boom")
		}
		return fencemigrate.BackfillDone{Step: e.lastStep["backfill"], Sessions: c(3, "n"), Err: err}
	case 6:
		e.now += int64(c(3, "dt")) * 50
		return fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: e.lastStep["timer"]}}
	case 7:
		return fencemigrate.OldLeasesScanned{Step: e.lastStep["scan"], Live: c(2, "live")}
	case 8:
		return fencemigrate.RequestEnable{}
	case 9:
		tok := e.lastStep["token"]
		if c(4, "wrong") == 0 {
			tok = "enable/999"
		}
		return fencemigrate.Confirm{Token: tok}
	default:
		if c(3, "gone") == 0 {
			return fencemigrate.PodGone{Pod: pods[c(len(pods), "pod")]}
		}
		return fencemigrate.ClusterEnabled{Step: e.lastStep["door"]}
	}
}

func (e *env) feed(in fencemigrate.Input) []fencemigrate.Command {
	out := e.m.On(&machine.Ctx{Now: e.now, Trace: &e.rec}, in)
	for _, c := range out {
		switch c := c.(type) {
		case fencemigrate.RunBackfill:
			e.lastStep["backfill"] = c.Step
		case fencemigrate.SetTimer:
			e.lastStep["timer"] = c.ID
		case fencemigrate.ScanOldLeases:
			e.lastStep["scan"] = c.Step
		case fencemigrate.AskConfirmation:
			e.lastStep["token"] = c.Token
		case fencemigrate.EnableCluster:
			e.lastStep["door"] = c.Step
		}
	}
	return out
}

// checkStep states the machine's safety properties for one transition: it returns an error
// naming the property that broke.
func checkStep(before fencemigrate.Snapshot, in fencemigrate.Input, out []fencemigrate.Command, after fencemigrate.Snapshot) error {
	for _, c := range out {
		switch c := c.(type) {
		case fencemigrate.AllowVersion:
			if c.Version != before.Allowed+1 {
				return fmt.Errorf("adjacency: allowed %s while %s was allowed", c.Version, before.Allowed)
			}
			for p, v := range before.Pods {
				if v != before.Allowed {
					return fmt.Errorf("adjacency: allowed %s while pod %s ran %s", c.Version, p, v)
				}
			}
			if c.Version == fencing.C && (!before.Backfilled || !before.Drained) {
				return fmt.Errorf("%w: C allowed with backfilled=%v drained=%v", fencing.ErrT3, before.Backfilled, before.Drained)
			}
			if before.Enabled {
				return errors.New("door: a version was allowed after enable")
			}
		case fencemigrate.EnableCluster:
			if _, ok := in.(fencemigrate.Confirm); !ok {
				return fmt.Errorf("door: EnableCluster without a confirmation (input %T)", in)
			}
			if before.Allowed != fencing.C || len(before.Pods) == 0 {
				return fmt.Errorf("door: enable with %s allowed and %d pods", before.Allowed, len(before.Pods))
			}
			for p, v := range before.Pods {
				if v != fencing.C {
					return fmt.Errorf("door: enable while pod %s ran %s", p, v)
				}
			}
			if !before.Backfilled || !before.Drained {
				return fmt.Errorf("%w: enable with backfilled=%v drained=%v", fencing.ErrT3, before.Backfilled, before.Drained)
			}
		case fencemigrate.SetTimer, fencemigrate.ScanOldLeases:
			if before.Enabled {
				return errors.New("drain: waiting or scanning after enable")
			}
		case fencemigrate.RunBackfill:
			if before.Backfilled || before.Allowed < fencing.B {
				return errors.New("backfill: run twice or before B")
			}
			for p, v := range before.Pods {
				if v < fencing.B {
					return fmt.Errorf("backfill: run while pod %s ran %s", p, v)
				}
			}
		}
	}
	if before.Enabled && !after.Enabled {
		return errors.New("door: closed again")
	}
	// Restart: the driver persists every snapshot and may resume from any of them, so each
	// one restores, to the same state.
	r, err := fencemigrate.Restore(after)
	if err != nil {
		return fmt.Errorf("restart: the machine's own snapshot is refused: %w", err)
	}
	if got := r.Snapshot(); !reflect.DeepEqual(got, after) {
		return fmt.Errorf("restart: restored as %+v, was %+v", got, after)
	}
	// The door window: from the EnableCluster command on, only C is allowed (the switch may
	// happen before the reply), so a pod reporting anything else raises an Alarm; and a
	// reply that opens the door under a pod not on C raises one too.
	alarmed := func(pod string) bool {
		return slices.ContainsFunc(out, func(c fencemigrate.Command) bool {
			a, ok := c.(fencemigrate.Alarm)
			return ok && a.Pod == pod
		})
	}
	switch in := in.(type) {
	case fencemigrate.PodReported:
		if (before.EnableStep != "" || before.Enabled) && in.Version != fencing.C && !alarmed(in.Pod) {
			return fmt.Errorf("door window: pod %s reported %s with the enable out (%q) and no Alarm", in.Pod, in.Version, before.EnableStep)
		}
	case fencemigrate.ClusterEnabled:
		if !before.Enabled && after.Enabled && !alarmed("") {
			for p, v := range after.Pods {
				if v != fencing.C {
					return fmt.Errorf("door window: cluster mode enabled while pod %s runs %s, no Alarm", p, v)
				}
			}
		}
	}
	return nil
}

func runRandom(c chooser, cfg fencemigrate.Config, steps int) error {
	e := &env{m: fencemigrate.New(cfg), lastStep: map[string]string{}}
	for range steps {
		in := e.next(c)
		before := e.m.Snapshot()
		out := e.feed(in)
		if err := checkStep(before, in, out, e.m.Snapshot()); err != nil {
			return fmt.Errorf("%w (input %T%+v)", err, in, in)
		}
	}
	return nil
}

// TestPropertySafety: on any input sequence the machine never allows a non-adjacent version,
// never opens the door without a confirmation, a full-C fleet, a backfill and a proven drain,
// never closes it again, and raises an Alarm for a pod that leaves C once the enable is out.
func TestPropertySafety(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		require.NoError(t, runRandom(rapidChooser(t), fencemigrate.Config{LeaseTTL: 100}, 300))
	})
}

// TestPropertyReachesEnable: the random inputs do reach the door (else the property above
// would hold vacuously).
func TestPropertyReachesEnable(t *testing.T) {
	enabled := 0
	for seed := range uint64(300) {
		e := &env{m: fencemigrate.New(fencemigrate.Config{LeaseTTL: 100}), lastStep: map[string]string{}}
		c := rngChooser(seed)
		for range 400 {
			e.feed(e.next(c))
		}
		if e.m.Enabled() {
			enabled++
		}
	}
	require.Greater(t, enabled, 0, "no random run opened the door")
	t.Logf("%d of 300 random runs reached enable", enabled)
}

// TestMutantM4TripsT3: with the gate into C dropped, random inputs reach a C allowance or an
// enable without backfill and drain.
func TestMutantM4TripsT3(t *testing.T) {
	for seed := range uint64(2000) {
		err := runRandom(rngChooser(seed), fencemigrate.Config{LeaseTTL: 100, Mutant: fencing.M4}, 400)
		if err != nil {
			require.ErrorIs(t, err, fencing.ErrT3)
			t.Logf("M4 tripped T3 at seed %d: %v", seed, err)
			return
		}
	}
	t.Fatal("M4 did not trip T3 in 2000 seeds")
}

// TestSnapshotRestoreAndDeterminism: a machine restored from a snapshot mid-run answers the
// rest of the inputs exactly as the original, and two runs of the same inputs emit the same
// trace bytes.
func TestSnapshotRestoreAndDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := rapidChooser(t)
		e := &env{m: fencemigrate.New(fencemigrate.Config{LeaseTTL: 100}), lastStep: map[string]string{}}
		var ins []fencemigrate.Input
		var nows []int64
		n := rapid.IntRange(1, 200).Draw(t, "n")
		cut := rapid.IntRange(0, n-1).Draw(t, "cut")
		var snap fencemigrate.Snapshot
		var outs [][]fencemigrate.Command
		for i := range n {
			if i == cut {
				snap = e.m.Snapshot()
			}
			in := e.next(c)
			ins, nows = append(ins, in), append(nows, e.now)
			outs = append(outs, e.feed(in))
		}
		trace := slices.Clone(e.rec.Events)

		r, err := fencemigrate.Restore(snap)
		require.NoError(t, err)
		for i := cut; i < n; i++ {
			got := r.On(&machine.Ctx{Now: nows[i]}, ins[i])
			require.True(t, reflect.DeepEqual(outs[i], got), "step %d after restore: %v vs %v", i, outs[i], got)
		}
		require.Equal(t, e.m.Snapshot(), r.Snapshot())

		again := fencemigrate.New(fencemigrate.Config{LeaseTTL: 100})
		var rec machine.Recorder
		for i := range n {
			again.On(&machine.Ctx{Now: nows[i], Trace: &rec}, ins[i])
		}
		require.Equal(t, trace, rec.Events)
	})
}

// TestSpecActionsHaveEmitters: every action listed for the spec is emitted by some scenario
// or random run, and nothing outside the list is emitted.
func TestSpecActionsHaveEmitters(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(300) {
		e := &env{m: fencemigrate.New(fencemigrate.Config{LeaseTTL: 100}), lastStep: map[string]string{}}
		c := rngChooser(seed)
		for range 400 {
			e.feed(e.next(c))
		}
		for _, ev := range e.rec.Events {
			require.Equal(t, fencemigrate.Spec, ev.Spec)
			require.Contains(t, fencemigrate.Actions, ev.Action, "emitted action missing from the spec's list")
			seen[ev.Action] = true
		}
	}
	for _, a := range fencemigrate.Actions {
		require.True(t, seen[a], "action %s has no emitter", a)
	}
}

func TestZeroTTLMeansDefault(t *testing.T) {
	m := fencemigrate.New(fencemigrate.Config{})
	require.Equal(t, int64(fencemigrate.DefaultLeaseTTL), m.Snapshot().Config.LeaseTTL)
}
