package fencing_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/fencing"
)

var sess = fencing.Session{Community: "acme", ID: "sess42"}
var keys = fencing.Buzz.Keys(sess)

func acq(t *testing.T, s fencing.Snapshot, now int64, v fencing.Version, owner string, m fencing.Mutant) fencing.Reply {
	t.Helper()
	r, err := fencing.Apply(s, keys, now, fencing.Call{Version: v, Op: fencing.Acquire, Owner: owner, TTL: 100}, m)
	require.NoError(t, err)
	return r
}

// TestAcquirePerVersion pins each version's acquire: which leases it checks, which counters
// it reads and writes, where the lease goes.
func TestAcquirePerVersion(t *testing.T) {
	start := func() fencing.Snapshot {
		return fencing.Snapshot{keys.OldGeneration: {Value: "5"}, keys.NewGeneration: {Value: "3"}}
	}
	cases := []struct {
		v        fencing.Version
		gen      uint64
		sp       fencing.Keyspace
		old, new string // counters after
	}{
		{fencing.O, 6, fencing.Old, "6", "3"},
		{fencing.A, 6, fencing.Old, "6", "6"},
		{fencing.B, 6, fencing.New, "5", "6"},
		{fencing.C, 4, fencing.New, "5", "4"},
	}
	for _, c := range cases {
		t.Run(c.v.String(), func(t *testing.T) {
			s := start()
			r := acq(t, s, 10, c.v, "pod1", fencing.NoMutant)
			require.True(t, r.OK)
			require.Equal(t, fencing.Lease{Space: c.sp, Owner: "pod1", Gen: c.gen}, r.Lease)
			require.Equal(t, c.old, s[keys.OldGeneration].Value)
			require.Equal(t, c.new, s[keys.NewGeneration].Value)
			require.Equal(t, fencing.Entry{Value: fmt.Sprintf("pod1:%d", c.gen), ExpiresAt: 110}, s[keys.Lease(c.sp)])
			require.Zero(t, s[keys.OldGeneration].ExpiresAt, "counters never expire")
		})
	}
}

// TestAcquireUnionCheck: O sees only old leases, C only new ones, A and B both.
func TestAcquireUnionCheck(t *testing.T) {
	for _, held := range []fencing.Keyspace{fencing.Old, fencing.New} {
		for _, v := range fencing.Versions {
			s := fencing.Snapshot{keys.Lease(held): {Value: "other:7", ExpiresAt: 50}}
			r := acq(t, s, 10, v, "pod1", fencing.NoMutant)
			require.Equal(t, !v.Reads(held), r.OK, "version %s with a live %s lease", v, held)
			if !r.OK {
				require.Equal(t, fencing.Lease{Space: held, Owner: "other", Gen: 7}, r.Holder)
			}
			// Once the held lease has expired every version grants.
			s = fencing.Snapshot{keys.Lease(held): {Value: "other:7", ExpiresAt: 50}}
			require.True(t, acq(t, s, 50, v, "pod1", fencing.NoMutant).OK, "expired at its deadline")
		}
	}
}

func TestRenewReleaseValidate(t *testing.T) {
	s := fencing.Snapshot{}
	l := acq(t, s, 0, fencing.B, "pod1", fencing.NoMutant).Lease
	call := func(v fencing.Version, op fencing.Op, l fencing.Lease, now int64) bool {
		r, err := fencing.Apply(s, keys, now, fencing.Call{Version: v, Op: op, Lease: l, TTL: 100}, fencing.NoMutant)
		require.NoError(t, err)
		return r.OK
	}
	require.True(t, call(fencing.B, fencing.Validate, l, 50))
	require.False(t, call(fencing.O, fencing.Validate, l, 50), "O cannot see a new-key lease")
	require.True(t, call(fencing.C, fencing.Renew, l, 90))
	require.Equal(t, int64(190), s[keys.NewLease].ExpiresAt)
	require.True(t, call(fencing.C, fencing.Validate, l, 150), "renew extended the lease")
	stale := l
	stale.Gen--
	require.False(t, call(fencing.C, fencing.Validate, stale, 150), "a stale generation fails the fence")
	require.False(t, call(fencing.C, fencing.Release, fencing.Lease{Space: fencing.New, Owner: "pod2", Gen: l.Gen}, 150))
	require.True(t, call(fencing.C, fencing.Release, l, 150))
	require.NotContains(t, s, keys.NewLease)
	require.False(t, call(fencing.C, fencing.Renew, l, 150), "a released lease cannot be renewed")
	require.Equal(t, "1", s[keys.NewGeneration].Value, "release keeps the counter")
}

func TestBackfill(t *testing.T) {
	bf := func(s fencing.Snapshot) bool {
		r, err := fencing.Apply(s, keys, 0, fencing.Call{Op: fencing.Backfill}, fencing.NoMutant)
		require.NoError(t, err)
		return r.OK
	}
	s := fencing.Snapshot{keys.OldGeneration: {Value: "9"}, keys.NewGeneration: {Value: "4"}}
	require.True(t, bf(s))
	require.Equal(t, "9", s[keys.NewGeneration].Value)
	require.False(t, bf(s), "idempotent")
	s = fencing.Snapshot{keys.OldGeneration: {Value: "2"}, keys.NewGeneration: {Value: "4"}}
	require.False(t, bf(s))
	require.Equal(t, "4", s[keys.NewGeneration].Value, "max-merge never lowers")
	s = fencing.Snapshot{}
	require.False(t, bf(s))
	require.Empty(t, s, "nothing to fold: nothing written")
}

func TestCorruptAndBadCalls(t *testing.T) {
	s := fencing.Snapshot{keys.OldGeneration: {Value: "x"}}
	_, err := fencing.Apply(s, keys, 0, fencing.Call{Version: fencing.A, Op: fencing.Acquire, Owner: "p", TTL: 1}, fencing.NoMutant)
	require.ErrorIs(t, err, fencing.ErrCorrupt)
	_, err = fencing.Apply(s, keys, 0, fencing.Call{Version: fencing.C, Op: fencing.Acquire, Owner: "", TTL: 1}, fencing.NoMutant)
	require.ErrorIs(t, err, fencing.ErrBadCall)
	_, err = fencing.Apply(s, keys, 0, fencing.Call{Version: fencing.C, Op: fencing.Renew, TTL: 0}, fencing.NoMutant)
	require.ErrorIs(t, err, fencing.ErrBadCall)
	s = fencing.Snapshot{keys.NewLease: {Value: "nocolon", ExpiresAt: 9}}
	_, err = fencing.Apply(s, keys, 0, fencing.Call{Version: fencing.C, Op: fencing.Acquire, Owner: "p", TTL: 1}, fencing.NoMutant)
	require.ErrorIs(t, err, fencing.ErrCorrupt)
	// An acquire without a positive TTL would write a lease that never expires (PX 0 is an
	// error on the server): refused before anything is written, for every version.
	for _, v := range fencing.Versions {
		for _, ttl := range []int64{0, -1} {
			s = fencing.Snapshot{}
			_, err = fencing.Apply(s, keys, 0, fencing.Call{Version: v, Op: fencing.Acquire, Owner: "p", TTL: ttl}, fencing.NoMutant)
			require.ErrorIs(t, err, fencing.ErrBadCall, "version %s ttl %d", v, ttl)
			require.Empty(t, s, "a refused call writes nothing")
		}
	}
	// The scripts never write a lease without an owner (acquire refuses one), so ":<gen>" is
	// corrupt, not a lease some pod holds.
	_, err = fencing.ParseLease(fencing.New, ":7")
	require.ErrorIs(t, err, fencing.ErrCorrupt)
	// Counters are exact up to 2^53 (the scripts' Lua numbers): that one is read, the next
	// is corrupt.
	for v, ok := range map[string]bool{"9007199254740992": true, "9007199254740993": false} {
		s = fencing.Snapshot{keys.OldGeneration: {Value: v}}
		_, err = fencing.Apply(s, keys, 0, fencing.Call{Op: fencing.Backfill}, fencing.NoMutant)
		if ok {
			require.NoError(t, err, v)
			require.Equal(t, v, s[keys.NewGeneration].Value)
		} else {
			require.ErrorIs(t, err, fencing.ErrCorrupt, v)
		}
	}
}

// TestMutantNames: each mutant has its own name (the name a test or a replay command shows),
// the correct protocol's is "none".
func TestMutantNames(t *testing.T) {
	seen := map[string]fencing.Mutant{}
	for _, m := range []fencing.Mutant{fencing.NoMutant, fencing.M1, fencing.M2, fencing.M3, fencing.M4, fencing.M5} {
		require.NotContains(t, seen, m.String(), "%d and %d share a name", seen[m.String()], m)
		seen[m.String()] = m
	}
	require.Equal(t, "none", fencing.NoMutant.String())
}

// TestBackfillIdempotent: on any state, backfilling twice equals backfilling once.
func TestBackfillIdempotent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := fencing.Snapshot{}
		if rapid.Bool().Draw(t, "old") {
			s[keys.OldGeneration] = fencing.Entry{Value: fmt.Sprint(rapid.Uint64Range(0, 1<<40).Draw(t, "o"))}
		}
		if rapid.Bool().Draw(t, "new") {
			s[keys.NewGeneration] = fencing.Entry{Value: fmt.Sprint(rapid.Uint64Range(0, 1<<40).Draw(t, "n"))}
		}
		once := s.Clone()
		_, err := fencing.Apply(once, keys, 0, fencing.Call{Op: fencing.Backfill}, fencing.NoMutant)
		require.NoError(t, err)
		twice := once.Clone()
		r, err := fencing.Apply(twice, keys, 0, fencing.Call{Op: fencing.Backfill}, fencing.NoMutant)
		require.NoError(t, err)
		require.False(t, r.OK)
		require.Equal(t, once, twice)
	})
}

func FuzzParseLease(f *testing.F) {
	f.Add("pod1:7")
	f.Add("a:b:18446744073709551615")
	f.Add(":1")
	f.Fuzz(func(t *testing.T, v string) {
		l, err := fencing.ParseLease(fencing.New, v)
		if err != nil {
			require.ErrorIs(t, err, fencing.ErrCorrupt)
			return
		}
		again, err := fencing.ParseLease(fencing.New, l.Value())
		require.NoError(t, err)
		require.Equal(t, l, again)
	})
}

func ExampleApply() {
	s := fencing.Snapshot{}
	k := fencing.Buzz.Keys(fencing.Session{Community: "acme", ID: "sess42"})
	// A pod on A takes the lease at t=0 for 30 s; a pod on B is refused while it is live.
	r, _ := fencing.Apply(s, k, 0, fencing.Call{Version: fencing.A, Op: fencing.Acquire, Owner: "pod-a", TTL: 30000}, fencing.NoMutant)
	fmt.Println(r.OK, r.Lease)
	r, _ = fencing.Apply(s, k, 1000, fencing.Call{Version: fencing.B, Op: fencing.Acquire, Owner: "pod-b", TTL: 30000}, fencing.NoMutant)
	fmt.Println(r.OK, r.Holder)
	// After the TTL the B pod gets the next generation on the new key.
	r, _ = fencing.Apply(s, k, 30000, fencing.Call{Version: fencing.B, Op: fencing.Acquire, Owner: "pod-b", TTL: 30000}, fencing.NoMutant)
	fmt.Println(r.OK, r.Lease)
	// Output:
	// true old/pod-a:1
	// false old/pod-a:1
	// true new/pod-b:2
}

// TestExpireMatchesGet: Expire removes exactly the keys Get already reports gone at now (a
// deadline at or before now), as the server's expiry would, and keeps the ones that never
// expire.
func TestExpireMatchesGet(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := fencing.Snapshot{}
		for i := range rapid.IntRange(0, 6).Draw(t, "keys") {
			s[fmt.Sprint("k", i)] = fencing.Entry{Value: "v", ExpiresAt: rapid.Int64Range(0, 20).Draw(t, "expires")}
		}
		now := rapid.Int64Range(0, 20).Draw(t, "now")
		before := s.Clone()
		s.Expire(now)
		for k, e := range before {
			_, live := before.Get(k, now)
			_, kept := s[k]
			require.Equal(t, live, kept, "key %s expiring at %d, now %d", k, e.ExpiresAt, now)
			if kept {
				require.Equal(t, e, s[k])
			}
		}
		require.LessOrEqual(t, len(s), len(before))
	})
}

// TestVersionAndKeyspaceNames: every version and keyspace reads back from its name (the
// names the reports and the differential test's logs carry); anything else is refused.
func TestVersionAndKeyspaceNames(t *testing.T) {
	for _, v := range fencing.Versions {
		got, err := fencing.ParseVersion(v.String())
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
	for _, sp := range []fencing.Keyspace{fencing.Old, fencing.New} {
		got, err := fencing.ParseKeyspace(sp.String())
		require.NoError(t, err)
		require.Equal(t, sp, got)
	}
	require.NotEqual(t, fencing.Old.String(), fencing.New.String())
	for _, bad := range []string{"", "D", "o", "Version(4)"} {
		_, err := fencing.ParseVersion(bad)
		require.Error(t, err, bad)
	}
	_, err := fencing.ParseKeyspace("both")
	require.Error(t, err)
}
