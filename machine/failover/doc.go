// Package failover repoints a shard after its primary was promoted away (§9.1 of the
// design): fence the old primary when it can be reached, put the promoted primary into the
// shard map record at a new generation by compare-and-set, and make the router follow.
//
// The router follows differently for the two engines:
//
//   - Vitess (MySQL/WeSQL): fence, TabletExternallyReparented <tablet> (Reparent), then the
//     record. Vitess routes by its own topology, so the tablet is reparented first and the
//     record mirrors it, as it mirrors SrvKeyspace after every Vitess step (§6.1).
//   - PgDog (Postgres): fence, the record, then the new generation is handed to ConfigPush
//     (Push), which writes the files and RELOADs every instance. PgDog routes by the files
//     rendered from the record, so the record comes first.
//
// The fence comes first so that a router still pointing at the old primary fails its
// writes (28000/57P01 for Postgres) instead of writing where nobody will read. An old
// primary that does not answer after Attempts tries is usually the reason for the failover:
// the machine goes on and raises an Alert (Done.Fenced is false). Every other command is
// retried until it succeeds, with an Alert once Attempts is spent: until it does, the shard
// has no writable primary in its routers, and there is nothing safer to do.
//
// A compare-and-set conflict is resolved from the record that won: if it already names the
// promoted primary at a newer generation (our own write whose answer was lost, or someone
// else's identical repoint) the machine goes on; if the shard is still there the repoint is
// made again on top of it, at that record's generation plus one; if the shard is gone the
// failover ends Failed. A reshard in progress keeps its target's generation (State.To)
// ahead of the new generation; a cutover running at the same time then finds the record
// moved and halts, which is the safe answer to a failover in the middle of a cutover.
//
// A restarted driver restores the last Snapshot and feeds Restarted: the command in flight
// is sent again with the same step id (every command is idempotent), or the retry timer is
// set again.
//
// Spec: PrimaryFailover. Actions: Start, Refuse, Fence, FenceSkipped, Reparent, Repoint,
// Rebase, Push, Restart, Done (the Act constants).
package failover
