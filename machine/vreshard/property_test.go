package vreshard_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// driver plays a driver with a crash-prone controller: it executes commands on the world,
// persists the snapshot (JSON) before each, and on a crash restores a new machine from it.
type driver struct {
	t       machinetest.TB
	m       *vreshard.Machine
	w       *world
	now     int64
	rng     *rand.Rand
	pending []vreshard.Command
	timers  machinetest.Timers
	done    *vreshard.Done
	log     []string
	sends   int              // commands issued so far
	alerts  []vreshard.Alert // every Alert, in order
	armed   []armed          // every SetTimer, in order
}

// armed is a timer set, with how long after the moment it was set it is due.
type armed struct {
	ID    string
	Delay int64
}

func newDriver(t machinetest.TB, w *world, start vreshard.Start) *driver {
	d := &driver{t: t, m: vreshard.New(), w: w, now: 1000, rng: rand.New(rand.NewPCG(7, 8)), timers: machinetest.Timers{}}
	w.now = func() int64 { return d.now }
	d.feed(start)
	return d
}

func (d *driver) feed(in vreshard.Input) {
	var rec machine.Recorder
	cmds := d.m.On(&machine.Ctx{Now: d.now, Rand: d.rng, Trace: &rec}, in)
	if r, ok := in.(vreshard.Reply); ok {
		// The event of a step's reply says whether it succeeded, as the reply did.
		for _, e := range rec.Events {
			if v, has := e.Get("ok"); has && v.Bool() != (r.Err == nil) {
				d.w.violate("%s for a reply with error %v", e, r.Err)
			}
		}
	}
	for _, c := range cmds {
		d.log = append(d.log, c.String())
		if t, ok := c.(vreshard.SetTimer); ok {
			d.armed = append(d.armed, armed{t.ID, t.At - d.now})
		}
		if d.timers.Record(c) {
			continue
		}
		switch c := c.(type) {
		case vreshard.Done:
			d.done = &c
			d.w.checkEnd(c)
		case vreshard.Alert:
			d.alerts = append(d.alerts, c)
		default:
			d.sends++
			d.pending = append(d.pending, c)
		}
	}
	if o, ended := d.m.Done(); ended != (d.done != nil) || ended && o != d.done.Outcome {
		d.w.violate("Done() says %v, %v; the Done command said %+v", o, ended, d.done)
	}
}

// crash loses what is pending (each command having taken effect or not, as apply says),
// restores the machine from its snapshot and feeds Restarted.
func (d *driver) crash(apply func(vreshard.Command) bool) {
	for _, c := range d.pending {
		if apply(c) {
			d.w.apply(c, nil, false)
		}
	}
	d.pending, d.timers = nil, machinetest.Timers{}
	d.m = machinetest.RoundTrip(d.t, d.m, vreshard.Restore)
	d.log = append(d.log, "-- crash, restart")
	d.feed(vreshard.Restarted{})
}

// finalize is the operator's finalize (the machine ignores it outside the hold).
func (d *driver) finalize() {
	d.w.finalized = true
	d.log = append(d.log, "-- finalize")
	d.feed(vreshard.Finalize{})
}

// settle runs the world reliably until Done (or a bound); the operator finalizes whenever
// nothing is pending.
func (d *driver) settle() {
	for i := 0; d.done == nil && i < 2000; i++ {
		if len(d.pending) > 0 {
			c := d.pending[0]
			d.pending = d.pending[1:]
			d.feed(d.w.apply(c, nil, false))
			continue
		}
		at := int64(-1)
		for _, a := range d.timers {
			if at < 0 || a < at {
				at = a
			}
		}
		if at < 0 {
			d.finalize()
			if len(d.pending) == 0 && len(d.timers) == 0 && d.done == nil {
				break
			}
			continue
		}
		d.now = max(d.now, at)
		for id, _, ok := d.timers.Pop(d.now); ok; id, _, ok = d.timers.Pop(d.now) {
			d.feed(vreshard.TimerFired{ID: id})
		}
	}
}

func (d *driver) violations() []string {
	v := slices.Clone(d.w.violations)
	if d.done == nil {
		v = append(v, "no Done once the world was reliable")
	}
	return v
}

// TestCrashAtEveryStep: the controller crashes after the k-th command was issued, for every
// k of a whole reshard, with that command having taken effect or not; the restored machine
// carries on from its snapshot. Every run ends Completed, no step takes effect twice, the
// record mirrors the live partition at every write and at the end, and traffic never
// switches before a clean VDiff.
func TestCrashAtEveryStep(t *testing.T) {
	d := newDriver(t, newWorld(fixture().Record), fixture())
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Completed, d.done.Outcome, strings.Join(d.log, "\n"))
	total := d.sends
	require.Greater(t, total, 12, "a whole reshard issues every step")
	for k := 1; k <= total; k++ {
		for _, took := range []bool{false, true} {
			d := newDriver(t, newWorld(fixture().Record), fixture())
			for d.done == nil && d.sends < k && len(d.pending) > 0 || d.done == nil && d.sends < k && len(d.timers) > 0 {
				if len(d.pending) > 0 {
					c := d.pending[0]
					d.pending = d.pending[1:]
					d.feed(d.w.apply(c, nil, false))
					continue
				}
				for id, at := range d.timers {
					d.now = max(d.now, at)
					delete(d.timers, id)
					d.feed(vreshard.TimerFired{ID: id})
					break
				}
			}
			d.crash(func(vreshard.Command) bool { return took })
			d.settle()
			if v := d.violations(); len(v) > 0 || d.done.Outcome != vreshard.Completed {
				t.Fatalf("crash after command %d (took effect: %v): violations %v, done %v\n%s", k, took, v, d.done, strings.Join(d.log, "\n"))
			}
		}
	}
}

// run drives a reshard through a hostile phase (failures that took effect or not,
// duplicated and late answers, crashes, timers, an operator's cancel), then a reliable one.
func run(c machinetest.Chooser, t machinetest.TB, chaos int, mu vreshard.Mutants, setup func(*world)) (*driver, []string) {
	start := fixture()
	start.Options.Mutants = mu
	w := newWorld(start.Record)
	if setup != nil {
		setup(w)
	}
	d := newDriver(t, w, start)
	var answered []vreshard.Input
	for i := 0; d.done == nil && i < chaos; i++ {
		switch k := c.IntN(21); {
		case k < 10 && len(d.pending) > 0:
			j := c.IntN(len(d.pending))
			cmd := d.pending[j]
			d.pending = slices.Delete(d.pending, j, j+1)
			var in vreshard.Input
			if c.IntN(4) == 0 {
				in = w.apply(cmd, errors.New("unreachable"), c.IntN(2) == 1)
			} else {
				in = w.apply(cmd, nil, false)
			}
			answered = append(answered, in)
			d.feed(in)
		case k < 12 && len(answered) > 0:
			d.feed(answered[c.IntN(len(answered))])
		case k < 16:
			d.now += int64(c.IntN(1500))
			if id, _, ok := d.timers.Pop(d.now); ok {
				d.feed(vreshard.TimerFired{ID: id})
			}
		case k < 19:
			answered = nil
			d.crash(func(vreshard.Command) bool { return c.IntN(2) == 1 })
		case k < 20:
			if mu == (vreshard.Mutants{}) && setup == nil {
				d.feed(vreshard.CancelRequest{})
			}
		default:
			d.finalize()
		}
	}
	d.settle()
	return d, d.violations()
}

// TestPropertyReshard: whatever the failures, crashes and duplicate answers, and whether an
// operator cancels on the way, the reshard ends (Completed, or Cancelled/Reversed after a
// cancel), no step takes effect twice, the record mirrors the live partition at every write
// and at the end, and the writes never switch before a clean VDiff.
func TestPropertyReshard(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d, v := run(machinetest.Rapid(t), t, rapid.IntRange(0, 120).Draw(t, "chaos"), vreshard.Mutants{}, nil)
		if len(v) > 0 {
			t.Fatalf("violations %v\n%s", v, strings.Join(d.log, "\n"))
		}
		if d.done.Outcome != vreshard.Completed && d.done.Outcome != vreshard.Cancelled && d.done.Outcome != vreshard.Reversed {
			t.Fatalf("ended %v\n%s", d.done, strings.Join(d.log, "\n"))
		}
	})
}

// TestPropertyTurnBack: a VDiff with mismatches cancels with nothing switched; a failed
// check through vtgate after the switch reverses the traffic; both mirror it.
func TestPropertyTurnBack(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		mismatch := rapid.Bool().Draw(t, "mismatch")
		d, v := run(machinetest.Rapid(t), t, rapid.IntRange(0, 80).Draw(t, "chaos"), vreshard.Mutants{}, func(w *world) {
			w.mismatch, w.verifyFail = mismatch, !mismatch
		})
		want := vreshard.Reversed
		if mismatch {
			want = vreshard.Cancelled
		}
		if len(v) > 0 || d.done.Outcome != want {
			t.Fatalf("violations %v, done %v, want %v\n%s", v, d.done, want, strings.Join(d.log, "\n"))
		}
		if mismatch {
			require.Zero(t, d.w.chk.Count("switch primary forward"), "nothing switched after a VDiff with mismatches")
			require.Contains(t, d.done.Reason, "corder")
		}
	})
}

// TestMutantsTripInvariants: each mutant is caught by the invariant named for it within 30
// seeds.
func TestMutantsTripInvariants(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutant    vreshard.Mutants
		invariant string
		setup     func(*world)
	}{
		{"SkipVDiff", vreshard.Mutants{SkipVDiff: true}, check.InvVReshardVDiff, nil},
		{"SkipMirror", vreshard.Mutants{SkipMirror: true}, check.InvVReshardMirror, nil},
		{"ForgetSent", vreshard.Mutants{ForgetSent: true}, check.InvVReshardOnce, nil},
		{"SkipHold", vreshard.Mutants{SkipHold: true}, check.InvVReshardHold, nil},
		{"IgnoreLag", vreshard.Mutants{IgnoreLag: true}, check.InvVReshardWriteStop, heavyWrites(20_000, 500)},
		{"SkipVerify", vreshard.Mutants{SkipVerify: true}, check.InvVReshardVerified, nil},
		{"RewriteSame", vreshard.Mutants{RewriteSame: true}, check.InvVReshardRecordChanges, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			for seed := range uint64(30) {
				_, v := run(machinetest.Seeded(seed), t, 60, tc.mutant, tc.setup)
				if strings.Contains(strings.Join(v, "\n"), tc.invariant) {
					caught++
				}
			}
			require.Positive(t, caught, "mutant %s never tripped %q in 30 seeds", tc.name, tc.invariant)
		})
	}
}

// TestSnapshotJSON: a snapshot taken at every step survives JSON and Restore unchanged.
func TestSnapshotJSON(t *testing.T) {
	d := newDriver(t, newWorld(fixture().Record), fixture())
	for d.done == nil {
		b, err := json.Marshal(d.m.Snapshot())
		require.NoError(t, err)
		var s vreshard.Snapshot
		require.NoError(t, json.Unmarshal(b, &s))
		_, err = vreshard.Restore(s)
		require.NoError(t, err, "%s", b)
		if len(d.pending) > 0 {
			c := d.pending[0]
			d.pending = d.pending[1:]
			d.feed(d.w.apply(c, nil, false))
			continue
		}
		if len(d.timers) == 0 {
			d.finalize() // the hold
			continue
		}
		for id, at := range d.timers {
			d.now = max(d.now, at)
			delete(d.timers, id)
			d.feed(vreshard.TimerFired{ID: id})
			break
		}
	}
	require.Equal(t, vreshard.Completed, d.done.Outcome)
}

// TestIdenticalConflicts: another writer storing the same record again and again (another
// controller's identical mirror; the simulator's store.cas.conflict, where the bound on
// rebases once ended the reshard Failed at seed 398) is written over as often as it
// happens: the reshard completes.
func TestIdenticalConflicts(t *testing.T) {
	w := newWorld(fixture().Record)
	w.bumps = 40
	d := newDriver(t, w, fixture())
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Completed, d.done.Outcome, d.done.Reason)
	require.Zero(t, w.bumps, "every conflict was met")
}

// TestHoldKeepsReverse: after the writes switched and vtgate verified them the machine
// holds, nothing sent and the workflow standing, however long; a cancel then reverses every
// tablet type back to the source (ends Reversed, the record back on shard 0 with the target
// kept for a new switch), and a Finalize instead completes. With finalize_after the hold
// ends on its own, at that timer and no other, a Finalize or a cancel before it cancels
// it, and a restart in the hold sets it again.
func TestHoldKeepsReverse(t *testing.T) {
	hold := func(o vreshard.Options) *driver {
		st := fixture()
		st.Options.FinalizeAfter = o.FinalizeAfter
		d := newDriver(t, newWorld(st.Record), st)
		for range 200 {
			if len(d.pending) > 0 {
				c := d.pending[0]
				d.pending = d.pending[1:]
				d.feed(d.w.apply(c, nil, false))
				continue
			}
			if d.w.verified && len(d.timers) <= 1 {
				break
			}
			for id, at := range d.timers {
				d.now = max(d.now, at)
				delete(d.timers, id)
				d.feed(vreshard.TimerFired{ID: id})
				break
			}
		}
		require.True(t, d.w.verified && d.w.writesOn && d.w.exists, "the writes switched and verified, the workflow stands\n%s", strings.Join(d.log, "\n"))
		require.Nil(t, d.done, strings.Join(d.log, "\n"))
		require.Empty(t, d.pending, "nothing is sent in the hold")
		return d
	}

	d := hold(vreshard.Options{})
	require.Empty(t, d.timers, "without finalize_after the hold has no deadline")
	d.now += 24 * 3600 * 1000
	d.feed(vreshard.Restarted{})
	d.crash(func(vreshard.Command) bool { return false })
	require.Empty(t, d.pending, "a restart in the hold sends nothing")
	d.feed(vreshard.CancelRequest{})
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Reversed, d.done.Outcome, strings.Join(d.log, "\n"))
	require.False(t, d.w.writesOn || d.w.readsOn || d.w.completed, "the source serves again, the workflow is not completed")
	require.Equal(t, []string{"0"}, check.ShardNames(d.w.store.Layout))

	d = hold(vreshard.Options{})
	d.finalize()
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Completed, d.done.Outcome)

	d = hold(vreshard.Options{FinalizeAfter: 60_000})
	d.feed(vreshard.CancelRequest{})
	require.NotContains(t, d.timers, "finalize:customer/wf/hold", "a cancel in the hold leaves the finalize_after timer armed")
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Reversed, d.done.Outcome)

	d = hold(vreshard.Options{FinalizeAfter: 60_000})
	d.finalize()
	require.Empty(t, d.timers, "the operator's finalize leaves the finalize_after timer armed")
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Completed, d.done.Outcome)

	d = hold(vreshard.Options{FinalizeAfter: 60_000})
	require.Len(t, d.timers, 1, "finalize_after arms one timer")
	d.crash(func(vreshard.Command) bool { return false })
	require.Len(t, d.timers, 1, "the restart arms it again")
	for id, at := range d.timers {
		require.GreaterOrEqual(t, at, int64(60_000))
		d.now = at
		delete(d.timers, id)
		d.feed(vreshard.TimerFired{ID: "poll:" + strings.TrimPrefix(id, "finalize:")}) // a stale timer of an earlier step
		require.Empty(t, d.pending, "a timer that is not the hold's ended it")
		d.w.finalized = true // finalize_after is the operator's standing decision
		d.feed(vreshard.TimerFired{ID: id})
		complete := slices.ContainsFunc(d.pending, func(c vreshard.Command) bool { _, ok := c.(vreshard.Complete); return ok })
		require.True(t, complete, "the finalize_after timer does not end the hold: %v", d.pending)
	}
	d.settle()
	require.Empty(t, d.violations())
	require.Equal(t, vreshard.Completed, d.done.Outcome)
}
