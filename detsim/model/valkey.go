package model

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/kernel/fencing"
)

// ErrCrossSlot is what a cluster answers a script whose keys are in different hash slots
// (CROSSSLOT): once cluster mode is enabled, only version C's acquire (the hash-tagged pair)
// and the one-key scripts run.
var ErrCrossSlot = errors.New("model: CROSSSLOT Keys in request don't hash to the same slot")

// Valkey is the fenced session directory's server (Valkey or Redis) as the fencing-key
// migration sees it: the keys of every session, the pods' reported script versions, and
// the cluster mode switch. Scripts mean what kernel/fencing says they mean (the reference
// the Lua scripts of adapters/valkey are held to by a differential test), so the model is
// the real scripts' semantics, not a copy of them. Keys expire by the simulated clock, as
// the server expires them: a lease written with ttl at t is live while now < t+ttl.
//
// Cluster mode, once enabled, refuses every script whose declared keys span hash slots
// (CROSSSLOT): the legacy pair and the mixed versions' four keys do, the hash-tagged pair
// of version C does not, and a renew, release or validate touches one key. The backfill
// reads both counters, so it is refused too. That is the one-way door: after it, nothing
// can read or write the old pair through a script that needs both.
type Valkey struct {
	s        *detsim.Sim
	Node     detsim.NodeID
	Naming   fencing.Naming
	Sessions []fencing.Session
	// Scripts is the mutant the deployed scripts carry (M1, M2, M3, M5 change acquire);
	// fencing.NoMutant is the protocol. M4 is the rollout machine's, not a script's.
	Scripts fencing.Mutant

	snap     fencing.Snapshot
	versions map[string]fencing.Version
	cluster  bool
	seq      int64

	// History is every script that ran, stamped with the server's clock in nanoseconds
	// (milliseconds × 10⁶ plus a sequence number, so stamps are distinct and ordered as the
	// scripts ran), for fencing.CheckT1 and fencing.CheckT2.
	History fencing.History
	// OnScript, when set, runs after every script that ran: a checker of the keys.
	OnScript func()
}

// NewValkey adds the server node; its keys are empty and cluster mode is disabled.
func NewValkey(s *detsim.Sim, name string, n fencing.Naming, sessions []fencing.Session) *Valkey {
	v := &Valkey{s: s, Naming: n, Sessions: slices.Clone(sessions), snap: fencing.Snapshot{}, versions: map[string]fencing.Version{}}
	if s != nil {
		v.Node = s.Net.AddNode(name)
	}
	return v
}

func (v *Valkey) now() int64 {
	if v.s == nil {
		return 0
	}
	return v.s.Now()
}

// declared returns the keys a script declares in KEYS, as adapters/valkey sends them.
func declared(k fencing.Keys, c fencing.Call) []string {
	switch c.Op {
	case fencing.Acquire:
		switch c.Version {
		case fencing.A, fencing.B:
			return []string{k.OldLease, k.OldGeneration, k.NewLease, k.NewGeneration}
		case fencing.C:
			return []string{k.NewLease, k.NewGeneration}
		}
		return []string{k.OldLease, k.OldGeneration}
	case fencing.Backfill:
		return []string{k.OldGeneration, k.NewGeneration}
	}
	return []string{k.Lease(c.Lease.Space)}
}

func sameSlot(keys []string) bool {
	for _, k := range keys[1:] {
		if fencing.Slot(k) != fencing.Slot(keys[0]) {
			return false
		}
	}
	return true
}

// Script runs one script call of pod on session sess, as the version's Lua script would.
// In cluster mode a script whose keys span slots is refused with ErrCrossSlot, and nothing
// changes.
func (v *Valkey) Script(pod string, sess fencing.Session, c fencing.Call) (fencing.Reply, error) {
	k := v.Naming.Keys(sess)
	if v.cluster && !sameSlot(declared(k, c)) {
		if v.s != nil {
			v.s.Probe("valkey.crossslot")
		}
		return fencing.Reply{}, fmt.Errorf("valkey: %s %s of %s by %s: %w", c.Op, c.Version, sess, pod, ErrCrossSlot)
	}
	now := v.now()
	r, err := fencing.Apply(v.snap, k, now, c, v.Scripts)
	if err != nil {
		return r, err
	}
	v.seq++
	if v.seq >= 1_000_000 {
		panic("model: more than 10⁶ scripts in one run: the history's stamps would collide")
	}
	at := now*1_000_000 + v.seq
	v.History = append(v.History, fencing.Event{Pod: pod, Session: sess, Call: c, Reply: r, Invoke: at, Return: at})
	v.snap.Expire(now)
	if v.OnScript != nil {
		v.OnScript()
	}
	return r, nil
}

// Backfill runs the backfill script over every session and returns how many new counters
// it raised. In cluster mode it is refused (it reads both counters).
func (v *Valkey) Backfill() (int, error) {
	if v.cluster {
		return 0, fmt.Errorf("valkey: backfill: %w", ErrCrossSlot)
	}
	raised := 0
	for _, sess := range v.Sessions {
		r, err := fencing.Apply(v.snap, v.Naming.Keys(sess), v.now(), fencing.Call{Op: fencing.Backfill}, v.Scripts)
		if err != nil {
			return raised, err
		}
		if r.OK {
			raised++
		}
	}
	return raised, nil
}

// LiveOldLeases counts the sessions whose old-key lease is live now: what a scan that is
// complete on every primary finds (adapters/valkey Executor.LiveOldLeases).
func (v *Valkey) LiveOldLeases() int {
	n := 0
	for _, sess := range v.Sessions {
		if _, ok := v.snap.Get(v.Naming.Keys(sess).OldLease, v.now()); ok {
			n++
		}
	}
	return n
}

// Report records that pod runs version (the pods' hash the executor's Versions reads).
func (v *Valkey) Report(pod string, version fencing.Version) { v.versions[pod] = version }

// Versions returns every pod's reported version.
func (v *Valkey) Versions() map[string]fencing.Version { return maps.Clone(v.versions) }

// EnableCluster switches cluster mode on, for good.
func (v *Valkey) EnableCluster() { v.cluster = true }

// Cluster reports whether cluster mode is enabled.
func (v *Valkey) Cluster() bool { return v.cluster }

// Keys returns the keys as they are now (live ones only), for checkers. Never modify it.
func (v *Valkey) Keys() fencing.Snapshot {
	v.snap.Expire(v.now())
	return v.snap
}

// ExpireLease deletes a session's lease in keyspace sp at once: the step by which an
// exhaustive exploration, whose time is abstract as in the seed's TLA+ model, lets a lease's
// TTL run out.
func (v *Valkey) ExpireLease(sess fencing.Session, sp fencing.Keyspace) bool {
	key := v.Naming.Keys(sess).Lease(sp)
	if _, ok := v.snap[key]; !ok {
		return false
	}
	delete(v.snap, key)
	return true
}

// HashState writes the keys (values and deadlines relative to now), the reported versions
// and the mode, canonically, for the explorer.
func (v *Valkey) HashState(w io.Writer) {
	now := v.now()
	for _, k := range v.Keys().Keys() {
		e := v.snap[k]
		exp := int64(-1)
		if e.ExpiresAt != 0 {
			exp = e.ExpiresAt - now
		}
		fmt.Fprintf(w, "%s=%s/%d;", k, e.Value, exp)
	}
	for _, p := range slices.Sorted(maps.Keys(v.versions)) {
		fmt.Fprintf(w, "%s:%s;", p, v.versions[p])
	}
	fmt.Fprintf(w, "cluster=%v\n", v.cluster)
}
