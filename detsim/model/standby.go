package model

import (
	"loam.dev/router/detsim"
)

// Standby is a shard's standby server following its primary by streaming replication,
// until it is promoted. With synchronous replication (synchronous_commit = on, the standby
// named in synchronous_standby_names) the primary acknowledges a commit only once the
// standby has it: while the standby cannot be reached, or after it was promoted, the
// primary's commits stay local and their clients wait (here: an indeterminate error at
// once, which a client cannot tell from a timeout). So every acknowledged write is on the
// standby when it is promoted, and the old primary acknowledges nothing after that, though
// it still takes writes (they commit locally, where stale readers would see them) until it
// is fenced.
//
// Async is the mutant "the standby is asynchronous" (or the primary acknowledges before the
// standby has the write): the primary acknowledges at once and ships each commit Lag ms
// later; what is still in flight when the standby is promoted is lost. It trips
// "no-lost-ack" across a failover.
//
// What is simplified: shipping is per commit, in order, exactly once; the standby applies
// what it receives at once; a standby that could not be reached catches up with the next
// commit it receives, and at promotion with whatever the link lets through then.
type Standby struct {
	s        *detsim.Sim
	Primary  *Backend
	Server   *Backend
	Async    bool
	Lag      int64
	applied  uint64 // the primary's last LSN the standby has
	promoted bool
	// PromotedStep is the simulator's event count at the promotion (0 before).
	PromotedStep int
}

// Follow makes standby a standby of primary, caught up with it now.
func Follow(s *detsim.Sim, primary, standby *Backend, async bool, lag int64) *Standby {
	st := &Standby{s: s, Primary: primary, Server: standby, Async: async, Lag: lag, applied: primary.LSN()}
	standby.LoadRows(primary.Rows())
	primary.Subscribe(st.commit)
	if !async {
		primary.SyncCommit = st.sync
	}
	return st
}

// linked reports whether the stream between the two servers can carry WAL now.
func (st *Standby) linked() bool {
	return !st.promoted && st.s.Net.Reachable(st.Primary.Node, st.Server.Node)
}

// ship sends what the standby does not have yet, if the stream is up.
func (st *Standby) ship() {
	if !st.linked() {
		return
	}
	cs := st.Primary.ChangesSince(st.applied)
	st.applied = st.Primary.LSN()
	if len(cs) > 0 {
		st.Server.ApplyReplicated("wal:"+st.Primary.Name, cs)
	}
}

func (st *Standby) commit() {
	if !st.Async {
		st.ship()
		return
	}
	st.s.After(st.Lag, detsim.Label{Kind: "wal", From: st.Primary.Name, To: st.Server.Name}, st.ship)
}

func (st *Standby) sync() error {
	if st.linked() && st.applied == st.Primary.LSN() {
		return nil
	}
	st.s.Probe("standby.sync_wait")
	return &detsim.IndeterminateError{From: st.Primary.Name, To: st.Server.Name, What: "commit",
		Cause: "waiting for the synchronous standby"}
}

// Promote ends the replication: the standby takes what the stream still lets through and
// becomes a primary of its own. The old primary can acknowledge nothing any more (its
// synchronous standby is gone), and with Async what was in flight is lost.
func (st *Standby) Promote() {
	if st.promoted {
		return
	}
	if !st.Async {
		st.ship()
	}
	st.promoted = true
	st.PromotedStep = st.s.Steps()
}

// Promoted reports whether the standby was promoted.
func (st *Standby) Promoted() bool { return st.promoted }
