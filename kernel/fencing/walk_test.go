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
