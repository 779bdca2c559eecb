package fencing

import (
	"errors"
	"fmt"
)

// The theorems of the seed, as errors a checker returns. Each is tripped by a mutant in a test.
var (
	// ErrT1 (single authority): at most one live lease per session across both keyspaces.
	ErrT1 = errors.New("fencing: T1 single authority violated")
	// ErrT2 (generation monotonicity): generations issued to leases strictly increase per
	// session across the counter handoff; none is issued twice.
	ErrT2 = errors.New("fencing: T2 generation monotonicity violated")
	// ErrT3 (one-way-door safety): cluster mode is enabled only once old-keyspace authority is
	// drained: every old counter folded into its new counter and no live old lease.
	ErrT3 = errors.New("fencing: T3 one-way door opened before the old keyspace was drained")
)

// LiveLeases returns the leases of one session that are live at now, old keyspace first.
func LiveLeases(s Snapshot, k Keys, now int64) ([]Lease, error) {
	var out []Lease
	for _, sp := range []Keyspace{Old, New} {
		if v, ok := s.Get(k.Lease(sp), now); ok {
			l, err := ParseLease(sp, v)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// CheckSingleAuthority is T1 on a state: it fails if any listed session has two live leases.
func CheckSingleAuthority(s Snapshot, n Naming, sessions []Session, now int64) error {
	for _, sess := range sessions {
		ls, err := LiveLeases(s, n.Keys(sess), now)
		if err != nil {
			return err
		}
		if len(ls) > 1 {
			return fmt.Errorf("%w: session %s has live leases %s and %s at t=%d", ErrT1, sess, ls[0], ls[1], now)
		}
	}
	return nil
}

// CheckDrained is the T3 condition on a state: for every listed session, no old lease is live
// and the new counter is at least the old one. The door may open only when it holds.
func CheckDrained(s Snapshot, n Naming, sessions []Session, now int64) error {
	for _, sess := range sessions {
		k := n.Keys(sess)
		if v, ok := s.Get(k.OldLease, now); ok {
			return fmt.Errorf("%w: session %s still has a live old lease %q at t=%d", ErrT3, sess, v, now)
		}
		o, err := counter(s, k.OldGeneration, now)
		if err != nil {
			return err
		}
		nw, err := counter(s, k.NewGeneration, now)
		if err != nil {
			return err
		}
		if nw < o {
			return fmt.Errorf("%w: session %s new counter %d is below old counter %d (backfill has not run)", ErrT3, sess, nw, o)
		}
	}
	return nil
}
