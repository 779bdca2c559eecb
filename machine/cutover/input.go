package cutover

import (
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Input is what the driver feeds in: the start request, one answer per command, timer
// firings, the operator's decision, and Restarted after a Restore.
type Input interface{ isInput() }

// Start begins a cutover of Record, which must be the stored record of a PgDog database in
// phase Resharding with its Target set and State.To = Generation+1: ConfigPush has already
// moved every instance to that generation, so the destination database
// <db>__reshard_<g> is rendered everywhere and unused by clients.
type Start struct {
	Record *shardmap.Record
	Plan   Plan
}

// Plan is who does what. Names reach PgDog's admin database, which lowercases every
// command, so they must be lower case.
type Plan struct {
	// Designated is the instance that copies, catches up and runs CUTOVER (it must be one
	// of Instances).
	Designated string
	// Instances is every PgDog instance serving the database; commands go out in this
	// order.
	Instances []string
	// Role is the application role fenced on the source shards (ALTER ROLE ... NOLOGIN and
	// its sessions terminated). The replication role PgDog uses is a different role and is
	// never fenced.
	Role string
	// Publication names the publication COPY_DATA replicates.
	Publication string
	Options     Options
}

// Restarted tells a machine rebuilt by Restore that the driver starting it has no command
// in flight and no timer set. The machine answers with every command whose reply it still
// waits for (same step ids, so the executor recognises the retry) and every timer it still
// needs. A CUTOVER that was in flight is not sent again: the machine first asks the
// designated instance what happened (ListTasks), because a second CUTOVER is not idempotent.
type Restarted struct{}

// Reply answers a command whose answer carries no data: Pause, Fence, Cutover, WriteFiles,
// Reload, Resume, StopTask, Unfence. Err is nil on success; any error (unreachable, refused,
// timed out) is a failure, and the machine decides from the step what a failure means.
// Step is the step id of the command answered, attempt suffix included: a Reply for an
// earlier attempt than the one in flight is ignored (see Command).
type Reply struct {
	Step string
	Err  error
}

// RecordWritten answers WriteRecord. On success Version is the new version. When the
// compare-and-set lost, Conflict is the record the store holds now (the driver takes it
// from adapters.ConflictError.Current) and Err says so; Conflict is nil for any other
// failure.
type RecordWritten struct {
	Step     string
	Version  uint64
	Conflict *shardmap.Record
	Err      error
}

// CopyStarted answers CopyData with the root task id PgDog returned.
type CopyStarted struct {
	Step string
	Task int64
	Err  error
}

// CopyPolled answers PollCopy: the copy task as SHOW TASKS lists it (State NotListed when
// it is not listed) and the lag of its replication slot in bytes from SHOW
// REPLICATION_SLOTS (-1 when the slot is not listed or its lag is NULL).
type CopyPolled struct {
	Step     string
	Task     Task
	LagBytes int64
	Err      error
}

// TasksListed answers ListTasks with every root task SHOW TASKS lists on the instance.
type TasksListed struct {
	Step  string
	Tasks []Task
	Err   error
}

// TimerFired is fed back when a SetTimer deadline has passed (convert with
// TimerFired(t) from machine.TimerFired).
type TimerFired machine.TimerFired

// Finalize is the operator's decision to keep the new layout: stop the reverse stream,
// wait the grace period, clear the fence on the retired shards. It is acted on once every
// instance has resumed; before the point of no return it is ignored.
type Finalize struct{}

// Reverse is the operator's decision to go back to the source layout. Before the point of
// no return it rolls the cutover back as soon as the step in flight settles; after it, once
// every instance has resumed, it runs steps 2–6 the other way.
type Reverse struct{}

func (Start) isInput()         {}
func (Restarted) isInput()     {}
func (Reply) isInput()         {}
func (RecordWritten) isInput() {}
func (CopyStarted) isInput()   {}
func (CopyPolled) isInput()    {}
func (TasksListed) isInput()   {}
func (TimerFired) isInput()    {}
func (Finalize) isInput()      {}
func (Reverse) isInput()       {}
