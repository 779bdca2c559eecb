package model_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/fencing"
)

var sessA = fencing.Session{Community: "acme", ID: "s1"}

func newValkey() (*detsim.Sim, *model.Valkey) {
	s := detsim.New(detsim.Config{Seed: 1})
	return s, model.NewValkey(s, "valkey", fencing.Buzz, []fencing.Session{sessA})
}

// TestValkeyIsTheKernel: every script answers and changes the keys exactly as
// kernel/fencing.Apply does on its own snapshot, over random calls of every version, with
// time moving so leases expire; the history records every script in order.
func TestValkeyIsTheKernel(t *testing.T) {
	s, v := newValkey()
	ref := fencing.Snapshot{}
	k := fencing.Buzz.Keys(sessA)
	rng := rand.New(rand.NewPCG(1, 2))
	held := map[string]fencing.Lease{}
	for i := range 2000 {
		s.Run(s.Now()+rng.Int64N(30), 1) // time passes
		pod := []string{"p1", "p2", "p3"}[rng.IntN(3)]
		c := fencing.Call{Version: fencing.Versions[rng.IntN(4)], TTL: 1 + rng.Int64N(100)}
		if l, ok := held[pod]; ok && rng.IntN(2) == 0 {
			c.Op, c.Lease = []fencing.Op{fencing.Renew, fencing.Validate, fencing.Release}[rng.IntN(3)], l
		} else {
			c.Op, c.Owner = fencing.Acquire, pod
		}
		want, werr := fencing.Apply(ref, k, s.Now(), c, fencing.NoMutant)
		got, err := v.Script(pod, sessA, c)
		require.Equal(t, werr, err, "call %d", i)
		require.Equal(t, want, got, "call %d: %+v", i, c)
		ref.Expire(s.Now())
		require.Equal(t, ref, v.Keys(), "call %d", i)
		if got.OK && c.Op == fencing.Acquire {
			held[pod] = got.Lease
		}
	}
	require.Len(t, v.History, 2000)
	for i := 1; i < len(v.History); i++ {
		require.Greater(t, v.History[i].Invoke, v.History[i-1].Invoke, "stamps order the scripts as they ran")
	}
}

// TestValkeyClusterMode: once cluster mode is on, the scripts whose keys span slots are
// refused with CROSSSLOT and change nothing (O, A and B acquires, the backfill); C's acquire
// and the one-key scripts run.
func TestValkeyClusterMode(t *testing.T) {
	_, v := newValkey()
	r, err := v.Script("p1", sessA, fencing.Call{Version: fencing.C, Op: fencing.Acquire, Owner: "p1", TTL: 100})
	require.NoError(t, err)
	require.True(t, r.OK)
	v.EnableCluster()
	require.True(t, v.Cluster())
	before := v.Keys().Clone()
	for _, ver := range []fencing.Version{fencing.O, fencing.A, fencing.B} {
		_, err := v.Script("p2", sessA, fencing.Call{Version: ver, Op: fencing.Acquire, Owner: "p2", TTL: 100})
		require.ErrorIs(t, err, model.ErrCrossSlot, "%s acquire", ver)
	}
	_, err = v.Backfill()
	require.ErrorIs(t, err, model.ErrCrossSlot)
	require.Equal(t, before, v.Keys(), "refused scripts change nothing")
	ok, err := v.Script("p1", sessA, fencing.Call{Version: fencing.C, Op: fencing.Validate, Lease: r.Lease})
	require.NoError(t, err)
	require.True(t, ok.OK)
	// The legacy pair of one session is in two slots, which is why it must be refused.
	k := fencing.Buzz.Keys(sessA)
	require.NotEqual(t, fencing.Slot(k.OldLease), fencing.Slot(k.OldGeneration))
	require.Equal(t, fencing.Slot(k.NewLease), fencing.Slot(k.NewGeneration))
}

// TestValkeyDrainFacts: LiveOldLeases counts live old leases only, the backfill raises the
// new counter once, and ExpireLease ends a lease at once.
func TestValkeyDrainFacts(t *testing.T) {
	s, v := newValkey()
	r, err := v.Script("p1", sessA, fencing.Call{Version: fencing.O, Op: fencing.Acquire, Owner: "p1", TTL: 50})
	require.NoError(t, err)
	require.Equal(t, fencing.Old, r.Lease.Space)
	require.Equal(t, 1, v.LiveOldLeases())
	n, err := v.Backfill()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = v.Backfill()
	require.NoError(t, err)
	require.Zero(t, n, "the backfill is idempotent")
	s.Run(s.Now()+50, 1)
	require.Zero(t, v.LiveOldLeases(), "expired at its deadline")
	_, err = v.Script("p2", sessA, fencing.Call{Version: fencing.B, Op: fencing.Acquire, Owner: "p2", TTL: 1 << 40})
	require.NoError(t, err)
	require.True(t, v.ExpireLease(sessA, fencing.New))
	require.False(t, v.ExpireLease(sessA, fencing.New))
	require.Empty(t, v.Keys()[fencing.Buzz.Keys(sessA).NewLease])
	v.Report("p1", fencing.B)
	require.Equal(t, map[string]fencing.Version{"p1": fencing.B}, v.Versions())
}
