package fencing

import (
	"errors"
	"fmt"
	"strconv"
)

// Op is a directory operation.
type Op uint8

// The operations. Acquire creates authority; Renew, Release and Validate act on an existing
// lease named by the caller; Backfill folds the old counter into the new one.
const (
	Acquire Op = iota + 1
	Renew
	Release
	Validate
	Backfill
)

func (o Op) String() string {
	switch o {
	case Acquire:
		return "acquire"
	case Renew:
		return "renew"
	case Release:
		return "release"
	case Validate:
		return "validate"
	case Backfill:
		return "backfill"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Mutant names a deliberate bug of the seed's table. The zero value is the correct protocol.
// Each mutant must trip the invariant named beside it (tests show it does).
type Mutant uint8

// The mutants of the seed, each a real bug someone could ship.
const (
	NoMutant Mutant = iota
	M1              // B's acquire drops the old-lease check: two owners (T1)
	M2              // A's acquire drops the new-lease check: two owners (T1)
	M3              // B issues newGen+1 without the max-merge: generation reuse (T2)
	M4              // the gate into C is dropped: no backfill, no drain (T1); see GateC
	M5              // A bumps only the old counter (INCR old, no dual write): reuse (T2)
)

func (m Mutant) String() string {
	if m == NoMutant {
		return "none"
	}
	return "M" + strconv.Itoa(int(m))
}

// Call is one script invocation by a pod running Version.
type Call struct {
	Version Version
	Op      Op
	Owner   string // Acquire: the new holder
	Lease   Lease  // Renew, Release, Validate: the lease the caller holds
	TTL     int64  // Acquire, Renew: lease time to live in milliseconds (> 0)
}

// Reply is a script's answer.
type Reply struct {
	// OK: Acquire granted; Renew/Release/Validate found the caller's lease live; Backfill
	// raised the new counter.
	OK bool
	// Lease is the granted lease (Acquire with OK).
	Lease Lease
	// Holder is the live lease that refused an Acquire (Acquire without OK).
	Holder Lease
}

// ErrBadCall is wrapped when a Call cannot be executed as given.
var ErrBadCall = errors.New("fencing: bad call")

// Apply executes c against the session keys k of snapshot s at time now, as the version's Lua
// script would, mutating s. It is the reference the Lua scripts are tested against.
func Apply(s Snapshot, k Keys, now int64, c Call, m Mutant) (Reply, error) {
	switch c.Op {
	case Acquire:
		if c.Owner == "" || c.TTL <= 0 {
			return Reply{}, fmt.Errorf("%w: acquire needs an owner and a positive TTL (owner %q, ttl %d)", ErrBadCall, c.Owner, c.TTL)
		}
		return acquire(s, k, now, c, m)
	case Renew, Release, Validate:
		if c.Op == Renew && c.TTL <= 0 {
			return Reply{}, fmt.Errorf("%w: renew needs a positive TTL (got %d)", ErrBadCall, c.TTL)
		}
		if !c.Version.Reads(c.Lease.Space) {
			return Reply{}, nil // this version never touches that keyspace: the lease is not held here
		}
		key := k.Lease(c.Lease.Space)
		if v, ok := s.Get(key, now); !ok || v != c.Lease.Value() {
			return Reply{}, nil
		}
		switch c.Op {
		case Renew:
			s[key] = Entry{Value: c.Lease.Value(), ExpiresAt: now + c.TTL}
		case Release:
			delete(s, key)
		}
		return Reply{OK: true}, nil
	case Backfill:
		return backfill(s, k, now)
	}
	return Reply{}, fmt.Errorf("%w: unknown op %d", ErrBadCall, c.Op)
}

func acquire(s Snapshot, k Keys, now int64, c Call, m Mutant) (Reply, error) {
	v := c.Version
	checkOld := v.Reads(Old) && !(v == B && m == M1)
	checkNew := v.Reads(New) && !(v == A && m == M2)
	if checkOld {
		if h, ok := s.Get(k.OldLease, now); ok {
			l, err := ParseLease(Old, h)
			return Reply{Holder: l}, err
		}
	}
	if checkNew {
		if h, ok := s.Get(k.NewLease, now); ok {
			l, err := ParseLease(New, h)
			return Reply{Holder: l}, err
		}
	}
	oldGen, err := counter(s, k.OldGeneration, now)
	if err != nil {
		return Reply{}, err
	}
	newGen, err := counter(s, k.NewGeneration, now)
	if err != nil {
		return Reply{}, err
	}
	var g uint64
	switch {
	case v == O, v == A && m == M5:
		g = oldGen + 1
		setCounter(s, k.OldGeneration, g)
	case v == A:
		g = max(oldGen, newGen) + 1
		setCounter(s, k.OldGeneration, g)
		setCounter(s, k.NewGeneration, g)
	case v == B && m == M3, v == C:
		g = newGen + 1
		setCounter(s, k.NewGeneration, g)
	case v == B:
		g = max(oldGen, newGen) + 1
		setCounter(s, k.NewGeneration, g)
	default:
		return Reply{}, fmt.Errorf("%w: unknown version %d", ErrBadCall, v)
	}
	l := Lease{Space: v.Writes(), Owner: c.Owner, Gen: g}
	s[k.Lease(l.Space)] = Entry{Value: l.Value(), ExpiresAt: now + c.TTL}
	return Reply{OK: true, Lease: l}, nil
}

func backfill(s Snapshot, k Keys, now int64) (Reply, error) {
	oldV, ok := s.Get(k.OldGeneration, now)
	if !ok {
		return Reply{}, nil
	}
	oldGen, err := parseCounter(k.OldGeneration, oldV)
	if err != nil {
		return Reply{}, err
	}
	newGen, err := counter(s, k.NewGeneration, now)
	if err != nil {
		return Reply{}, err
	}
	if newGen >= oldGen {
		return Reply{}, nil
	}
	s[k.NewGeneration] = Entry{Value: oldV}
	return Reply{OK: true}, nil
}

func counter(s Snapshot, key string, now int64) (uint64, error) {
	v, ok := s.Get(key, now)
	if !ok {
		return 0, nil
	}
	return parseCounter(key, v)
}

func setCounter(s Snapshot, key string, g uint64) {
	s[key] = Entry{Value: strconv.FormatUint(g, 10)}
}
