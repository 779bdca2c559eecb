// Package vreshard drives a Vitess Reshard of one keyspace (§6.4's last paragraph and §6.1's
// Vitess mirror): Vitess copies, catches up, buffers in vtgate and switches with its own
// tablet controls; Loam decides when each step may run, checks it, and mirrors Vitess's
// serving partition into the shard map record after every step, so that locate and the
// checkers know the live partition. It is sans-I/O like every machine: it takes a Ctx and
// returns commands, and resumes from its Snapshot after a controller crash at any step.
//
// The steps, each one command in flight, each answered before the next:
//
//	Inspect      pre-flight (Check): shards exist and serve, binlog ROW + FULL image +
//	             GTID on every source, target ranges partition the source ranges, the
//	             VSchema's primary vindex covers every table
//	Mirror       ReadServing (GetSrvKeyspaces) then WriteRecord (compare-and-set)
//	Create       ReshardCreate
//	Mirror
//	Copy         WorkflowStatus polled until the copy is done and lag is under MaxLag
//	VDiff        VDiff create, then VDiff show polled until it completes: 0 mismatches
//	Reads        WorkflowSwitchTraffic replica,rdonly
//	Mirror
//	Writes       WorkflowSwitchTraffic primary
//	Mirror
//	Verify       the driver checks through vtgate that the target shards serve the rows
//	Hold         nothing sent: the target serves, the reverse workflow keeps the source
//	             current, and ReverseTraffic is still possible; an operator's Finalize (or
//	             Options.FinalizeAfter) ends it, a cancel reverses
//	Complete     Reshard complete (MoveTablesComplete): no going back from here
//	Mirror       Done Completed
//
// A VDiff with mismatches, a workflow in error, or Cancel from an operator before the
// writes are switched cancels the workflow (reads switched back first when they were),
// mirrors and ends Cancelled. A failed Verify, or Cancel after the writes are switched (the
// hold included), reverses the traffic (ReverseTraffic of every tablet type), mirrors and
// ends Reversed: the workflow stays, with reverse replication keeping the old shards current.
//
// Every command is idempotent and names the state it brings about, not a delta: a driver
// that crashed after the command took effect but before its answer was saved sends it
// again after Restarted, and the executor must answer success when Vitess is already in
// that state (a workflow that exists with the same shards, traffic already switched). So
// no step takes effect twice, and the world test checks it, crashing at every step.
//
// The record: before the writes switch, Layout is the source shards (what vtgate sends
// primary traffic to) and Target the target shards, phase Resharding; after, Layout is the
// target shards and Target the source ones (what a ReverseTraffic would route to); after
// Complete or a cancel, Target is gone and the phase is Serving. Layout always follows the
// PRIMARY partition of the SrvKeyspace read just before the write; the generation goes up
// whenever Layout or Target changes.
//
// Spec: VitessReshard. Actions: Start, Refuse, Inspect, Mirror, Create, Copy, VDiff, Switch,
// Verify, Hold, Finalize, Complete, Cancel, Reverse, Retry, Restart, Done (the Act constants).
package vreshard
