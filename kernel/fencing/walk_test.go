package fencing_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
)

// A seeded random walk with real (logical) time: three pods upgrade through the rollout while
// acquiring, renewing, validating and releasing leases on two sessions with a TTL, and every
// call is recorded as a History. It is what the simulator will do at scale; here it shows the
// history checkers CheckT1 and CheckT2 are sound on the correct protocol and trip on mutants.

const walkTTL = 60

type walkPod struct {
	name string
	v    fencing.Version
	held map[fencing.Session]fencing.Lease
}

func walk(seed uint64, m fencing.Mutant, steps int) (fencing.History, error) {
	rng := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}))
	sessions := []fencing.Session{{Community: "acme", ID: "s1"}, {Community: "acme", ID: "s2"}}
	snap := fencing.Snapshot{}
	pods := []*walkPod{}
	for i := range 3 {
		pods = append(pods, &walkPod{name: fmt.Sprintf("p%d", i+1), held: map[fencing.Session]fencing.Lease{}})
	}
	allowed, backfilled := fencing.O, false
	var now int64
	var h fencing.History
	all := func(v fencing.Version) bool {
		for _, p := range pods {
			if p.v != v {
				return false
			}
		}
		return true
	}
	for i := range steps {
		now += rng.Int64N(8)
		at := now*1e6 + int64(i)
		p := pods[rng.IntN(len(pods))]
		s := sessions[rng.IntN(len(sessions))]
		k := fencing.Buzz.Keys(s)
		call := fencing.Call{Version: p.v, TTL: walkTTL}
		switch r := rng.IntN(10); {
		case r == 0:
			if p.v < allowed {
				p.v++
			}
			continue
		case r == 1:
			drained := fencing.CheckDrained(snap, fencing.Buzz, sessions, now) == nil
			switch {
			case allowed == fencing.B && all(fencing.B) && !backfilled:
				for _, s := range sessions {
					if _, err := fencing.Apply(snap, fencing.Buzz.Keys(s), now, fencing.Call{Op: fencing.Backfill}, m); err != nil {
						return h, err
					}
				}
				backfilled = true
			case allowed < fencing.B && all(allowed),
				allowed == fencing.B && all(fencing.B) && (m == fencing.M4 || backfilled && drained):
				allowed++
			}
			continue
		case r < 5:
			if _, ok := p.held[s]; ok {
				call.Op, call.Lease = fencing.Renew, p.held[s]
			} else {
				call.Op, call.Owner = fencing.Acquire, p.name
			}
		case r < 7:
			l, ok := p.held[s]
			if !ok {
				continue
			}
			call.Op, call.Lease = fencing.Validate, l
		default:
			l, ok := p.held[s]
			if !ok {
				continue
			}
			call.Op, call.Lease = fencing.Release, l
		}
		rep, err := fencing.Apply(snap, k, now, call, m)
		if err != nil {
			return h, err
		}
		h = append(h, fencing.Event{Pod: p.name, Session: s, Call: call, Reply: rep, Invoke: at, Return: at})
		switch {
		case call.Op == fencing.Acquire && rep.OK:
			p.held[s] = rep.Lease
		case call.Op == fencing.Release, !rep.OK:
			delete(p.held, s)
		}
		if err := fencing.CheckSingleAuthority(snap, fencing.Buzz, sessions, now); err != nil {
			return h, err
		}
	}
	return h, nil
}

// TestWalkProtocolHoldsT1T2: the correct protocol passes the state check and both history
// checkers on every seed.
func TestWalkProtocolHoldsT1T2(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 50
	}
	grants := 0
	for seed := range uint64(seeds) {
		h, err := walk(seed, fencing.NoMutant, 400)
		require.NoError(t, err, "seed %d", seed)
		require.NoError(t, fencing.CheckT1(h), "seed %d", seed)
		require.NoError(t, fencing.CheckT2(h), "seed %d", seed)
		for _, e := range h {
			if e.Call.Op == fencing.Acquire && e.Reply.OK {
				grants++
			}
		}
	}
	require.Greater(t, grants, seeds*10, "the walk must actually grant leases")
}

// TestWalkMutantsTripHistoryCheckers: each acquire mutant is caught by the history checker of
// its invariant (not only by the state check), within a bounded number of seeds.
func TestWalkMutantsTripHistoryCheckers(t *testing.T) {
	for m, inv := range map[fencing.Mutant]error{
		fencing.M1: fencing.ErrT1, fencing.M2: fencing.ErrT1, fencing.M3: fencing.ErrT2,
		fencing.M4: fencing.ErrT1, fencing.M5: fencing.ErrT2,
	} {
		t.Run(m.String(), func(t *testing.T) {
			for seed := range uint64(5000) {
				h, _ := walk(seed, m, 400) // the state check may stop the walk: the history so far is checked
				var err error
				if inv == fencing.ErrT1 {
					err = fencing.CheckT1(h)
				} else {
					err = fencing.CheckT2(h)
				}
				if err != nil {
					require.True(t, errors.Is(err, inv), "%v", err)
					t.Logf("%s tripped %v at seed %d (%d seeds run): %v", m, inv, seed, seed+1, err)
					return
				}
			}
			t.Fatalf("%s did not trip %v in 5000 seeds", m, inv)
		})
	}
}

// TestHistoryCheckersOnRealTimeOverlap pins the window rules for calls that take time.
func TestHistoryCheckersOnRealTimeOverlap(t *testing.T) {
	ms := int64(1e6)
	a := fencing.Lease{Space: fencing.New, Owner: "p1", Gen: 1}
	b := fencing.Lease{Space: fencing.New, Owner: "p2", Gen: 2}
	grant := func(l fencing.Lease, inv, ret int64) fencing.Event {
		return fencing.Event{Pod: l.Owner, Session: sess, Call: fencing.Call{Op: fencing.Acquire, Owner: l.Owner, TTL: 10}, Reply: fencing.Reply{OK: true, Lease: l}, Invoke: inv, Return: ret}
	}
	release := func(l fencing.Lease, inv int64) fencing.Event {
		return fencing.Event{Pod: l.Owner, Session: sess, Call: fencing.Call{Op: fencing.Release, Lease: l}, Reply: fencing.Reply{OK: true}, Invoke: inv, Return: inv + 1}
	}
	// b granted inside a's certain window: violation.
	require.ErrorIs(t, fencing.CheckT1(fencing.History{grant(a, 0, 1*ms), grant(b, 2*ms, 3*ms)}), fencing.ErrT1)
	// a released before b was sent: fine.
	require.NoError(t, fencing.CheckT1(fencing.History{grant(a, 0, 1*ms), release(a, 2*ms), grant(b, 2*ms+5, 3*ms)}))
	// b's call overlaps a's release call: the order is unknown, so no verdict.
	require.NoError(t, fencing.CheckT1(fencing.History{grant(a, 0, 1*ms), release(a, 3*ms), grant(b, 2*ms, 4*ms)}))
	// a expired (TTL 10 ms from its invoke) before b: fine.
	require.NoError(t, fencing.CheckT1(fencing.History{grant(a, 0, 1*ms), grant(b, 10*ms, 11*ms)}))
	// T2: same generation twice; and a later-sent grant with a smaller generation.
	require.ErrorIs(t, fencing.CheckT2(fencing.History{grant(a, 0, 1), grant(fencing.Lease{Space: fencing.Old, Owner: "p3", Gen: 1}, 5, 6)}), fencing.ErrT2)
	require.ErrorIs(t, fencing.CheckT2(fencing.History{grant(b, 0, 1), grant(a, 5, 6)}), fencing.ErrT2)
	require.NoError(t, fencing.CheckT2(fencing.History{grant(b, 0, 6), grant(a, 5, 7)}), "concurrent calls may land in either order")
}

// TestHistoryCheckersWindowEdges pins where a lease's certain window starts and ends, the
// renewals that extend it and the release that cuts it, and the real-time order of T2, on
// histories with calls that take time. Each case is a verdict a sound and complete checker
// must give: a violation where two owners were certain, none where the order is unknown.
func TestHistoryCheckersWindowEdges(t *testing.T) {
	ms := int64(1e6)
	lease := func(owner string, gen uint64) fencing.Lease {
		return fencing.Lease{Space: fencing.New, Owner: owner, Gen: gen}
	}
	a, b := lease("p1", 1), lease("p2", 2)
	grant := func(l fencing.Lease, inv, ret int64) fencing.Event {
		return fencing.Event{Pod: l.Owner, Session: sess, Call: fencing.Call{Op: fencing.Acquire, Owner: l.Owner, TTL: 10}, Reply: fencing.Reply{OK: true, Lease: l}, Invoke: inv, Return: ret}
	}
	use := func(op fencing.Op, l fencing.Lease, inv int64) fencing.Event {
		return fencing.Event{Pod: l.Owner, Session: sess, Call: fencing.Call{Op: op, Lease: l, TTL: 10}, Reply: fencing.Reply{OK: true}, Invoke: inv, Return: inv + 1}
	}
	for name, tc := range map[string]struct {
		h    fencing.History
		want error
	}{
		// a's grant guarantees it until 10 ms (its invoke + TTL): b answered at 10 ms may
		// have landed at 10 ms, when a may be gone.
		"answered at the window's end": {fencing.History{grant(a, 0, 1*ms), grant(b, 9*ms, 10*ms)}, nil},
		"answered before its end":      {fencing.History{grant(a, 0, 1*ms), grant(b, 9*ms, 10*ms-1)}, fencing.ErrT1},
		// b sent at the instant a's grant was answered: a was live already.
		"sent as a was answered": {fencing.History{grant(a, 0, 1*ms), grant(b, 1*ms, 2*ms)}, fencing.ErrT1},
		"sent before a answered": {fencing.History{grant(a, 0, 1*ms), grant(b, 1*ms-1, 2*ms)}, nil},
		// A renewal sent at 8 ms guarantees a until 18 ms.
		"inside the renewed window":  {fencing.History{grant(a, 0, 1*ms), use(fencing.Renew, a, 8*ms), grant(b, 12*ms, 13*ms)}, fencing.ErrT1},
		"after the renewed window":   {fencing.History{grant(a, 0, 1*ms), use(fencing.Renew, a, 8*ms), grant(b, 18*ms, 19*ms)}, nil},
		"a validate renews nothing":  {fencing.History{grant(a, 0, 1*ms), use(fencing.Validate, a, 8*ms), grant(b, 12*ms, 13*ms)}, nil},
		"a failed renew renews none": {fencing.History{grant(a, 0, 1*ms), func() fencing.Event { e := use(fencing.Renew, a, 8*ms); e.Reply.OK = false; return e }(), grant(b, 12*ms, 13*ms)}, nil},
		// The earliest release ends the window, also when it was sent at time 0.
		"after the first of two releases": {fencing.History{grant(a, 0, 1*ms), use(fencing.Release, a, 2*ms), use(fencing.Release, a, 6*ms), grant(b, 3*ms, 4*ms)}, nil},
		"after a release sent at 0":       {fencing.History{grant(a, -2*ms, -1*ms), use(fencing.Release, a, 0), use(fencing.Release, a, 6*ms), grant(b, 3*ms, 4*ms)}, nil},
		"before a release":                {fencing.History{grant(a, -2*ms, -1*ms), use(fencing.Release, a, 6*ms), grant(b, 3*ms, 4*ms)}, fencing.ErrT1},
		// T2: one generation granted twice by overlapping calls (no real-time order to
		// break, only the duplicate).
		"one generation twice, overlapping": {fencing.History{grant(a, 0, 6), grant(lease("p3", 1), 5, 7)}, fencing.ErrT2},
		// T2 compares a grant with the largest generation answered before it was sent: g5
		// then the concurrent g2 both answered before g4 was sent (the windows are over by
		// then, so T1 has nothing to say).
		"below the largest answered before": {fencing.History{grant(lease("p1", 5), 0, 1*ms), grant(lease("p2", 2), ms/2, 2*ms), grant(lease("p3", 4), 30*ms, 31*ms)}, fencing.ErrT2},
		"above the largest answered before": {fencing.History{grant(lease("p1", 5), 0, 1*ms), grant(lease("p2", 2), ms/2, 2*ms), grant(lease("p3", 6), 30*ms, 31*ms)}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			err := fencing.CheckT1(tc.h)
			if tc.want == fencing.ErrT1 {
				require.ErrorIs(t, err, fencing.ErrT1)
			} else {
				require.NoError(t, err)
			}
			err = fencing.CheckT2(tc.h)
			if tc.want == fencing.ErrT2 {
				require.ErrorIs(t, err, fencing.ErrT2)
			} else {
				require.NoError(t, err)
			}
		})
	}
}
