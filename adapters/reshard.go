package adapters

import "context"

// Resharder is the part of a PgDog instance's admin database that a cutover needs beyond
// RouterInstance: the resharding commands, on one instance (the designated one). The
// RouterInstance seam stays generic (Apply, Pause, Resume, Observe); these are PgDog's own,
// and the cutover machine (loam.dev/router/machine/cutover) issues one command per method.
//
// PgDog lowercases every admin command and takes one per query message, in the simple
// query protocol; every name passed here must therefore be lower case.
type Resharder interface {
	// CopyData starts COPY_DATA <source> <destination> <publication> <slot>: schema sync,
	// copy, then replication that waits for an explicit Cutover (RESHARD is not used: it
	// cuts over on its own, on one instance). It returns the root task id. Slot is chosen
	// by the caller so that a retried call can be recognised.
	CopyData(ctx context.Context, source, destination, publication, slot string) (task int64, err error)
	// Tasks lists the root tasks (SHOW TASKS rows whose scope is root).
	Tasks(ctx context.Context) ([]Task, error)
	// SlotLag reports the lag in bytes of the COPY_DATA named slot that reads from shards
	// source shards: PgDog makes one replication slot per source shard, <slot>_<i> for i in
	// [0, shards), and SHOW REPLICATION_SLOTS lists each with its lag_bytes; the lag is the
	// largest. ok is false when one of them is not listed or its lag is NULL: a source
	// shard without its slot has no stream, and its lag is unknown, not zero.
	SlotLag(ctx context.Context, slot string, shards int) (lag int64, ok bool, err error)
	// Cutover runs CUTOVER <task>: the instance drains, swaps the two databases' names in
	// its routing, starts the reverse stream and clears its maintenance holds. It is not
	// idempotent and must not be retried by the implementation.
	Cutover(ctx context.Context, task int64) error
	// StopTask runs STOP_TASK <task>. A task that is not found is not an error: it is gone
	// either way.
	StopTask(ctx context.Context, task int64) error
}

// SlotDrainer is the part of a shard's backend that a cutover's drain needs (the
// cutover.Cutover command's Drain): wait, after the shard is fenced, until the logical
// replication stream whose slots are named after slot has confirmed everything the shard's
// WAL held when the wait began. The driver sends CUTOVER only once every shard traffic
// leaves has drained. An implementation returns an error when the stream has no slot there
// (a drain of nothing proves nothing) and when its time runs out (loam.dev/router/adapters/
// postgres.Backend.AwaitSlotDrain).
type SlotDrainer interface {
	AwaitSlotDrain(ctx context.Context, slot string) error
}
