package failover

import (
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Input is what the driver feeds in: the start request, one answer per command, timer
// firings, and Restarted after a Restore.
type Input interface{ isInput() }

// Start repoints Shard to Promoted, a replica that was just promoted (by Loam's own
// failover, §29 §7.3). Record is the stored record; the shard is looked up by name in its
// serving layout, then in its reshard target.
type Start struct {
	Record *shardmap.Record
	Shard  string
	// Promoted is the new primary. For a Vitess keyspace Tablet must be its tablet alias.
	// Replicas, when given, replace the shard's replicas; otherwise the shard keeps its
	// replicas except the promoted one.
	Promoted shardmap.Backend
	// Role is the application role fenced on the old primary (PgDog databases; a MySQL
	// executor fences its own way and may ignore it).
	Role    string
	Options Options
}

// Restarted tells a machine rebuilt by Restore that nothing is in flight and no timer is
// set: it sends again the command it waits on (same step id), or sets its retry timer.
type Restarted struct{}

// Reply answers FenceOld, Reparent and Push: Err is nil on success. An answer whose Step
// and Attempt are not those of the command in flight is ignored.
type Reply struct {
	Step    string
	Attempt int // the command's Attempt, echoed
	Err     error
	// Permanent says that sending the command again cannot succeed: the request itself is
	// wrong, not the moment (the driver sets it for adapters.ErrWrongShard, a promoted
	// tablet that serves another shard). A permanent Reparent error ends the failover
	// Failed at once, with the record unchanged, instead of being retried forever; a
	// permanent fence error ends the fence's tries as Attempts failures would.
	Permanent bool
}

// RecordWritten answers WriteRecord. On success Version is the new version. When the
// compare-and-set lost, Conflict is the record the store holds now
// (adapters.ConflictError.Current) and Err says so.
type RecordWritten struct {
	Step     string
	Attempt  int // the command's Attempt, echoed
	Version  uint64
	Conflict *shardmap.Record
	Err      error
}

// TimerFired is fed back when a SetTimer deadline has passed (convert with
// TimerFired(t) from machine.TimerFired).
type TimerFired machine.TimerFired

func (Start) isInput()         {}
func (Restarted) isInput()     {}
func (Reply) isInput()         {}
func (RecordWritten) isInput() {}
func (TimerFired) isInput()    {}
