package cutover

// Options tune the cutover. Zero values take the defaults named on each field.
type Options struct {
	// LagThreshold is the replication slot lag, in bytes, at or under which the copy
	// counts as caught up and instances are paused. Default 1,000,000 (PgDog's own
	// cutover_traffic_stop_threshold default). It bounds the pause: every instance is held
	// while CUTOVER drains what the stream has not carried, and PgDog aborts a CUTOVER that
	// does not drain within its cutover_timeout; set it to what the stream carries well
	// within that timeout. Shown by the simulator's cutover-drain world (a stream of finite
	// throughput under a burst of writes: pausing at any lag rolls the cutover back).
	LagThreshold int64
	// PollEvery is the interval between catch-up polls and between ListTasks polls while
	// a CUTOVER is in progress, in ms. Default 1000.
	PollEvery int64
	// CatchUpDeadline bounds step 1, in ms from the first CopyData: a copy that has not
	// caught up by then is rolled back. Default 6 h.
	CatchUpDeadline int64
	// RetryAfter is the base delay before a failed command is sent again, in ms; each
	// retry waits RetryAfter plus up to RetryAfter/2 of jitter from ctx.Rand. Default 500.
	RetryAfter int64
	// Attempts is how many times a command is sent before its failure counts. After
	// the point of no return, commands that must succeed (the record, the files, the
	// fence's release) are retried beyond it with an Alert. Default 3.
	Attempts int
	// InstanceAttempts, when positive, is how many times Pause and Reload are sent to an
	// instance other than the designated one before it counts as missed (Done.Missed) or
	// lagging (Done.Lagging); default Attempts. Every write waits out those retries, while
	// the fence already keeps an instance that missed the step off the layout traffic
	// leaves: 1 goes on at its first failure, which is what the pause window wants when an
	// instance is down, at the price of listing one whose failure was brief.
	InstanceAttempts int
	// Grace is how long finalize waits between stopping the reverse stream and clearing
	// the fence on the retired shards, in ms. Default 60,000. It must exceed how long a
	// statement can still be travelling to a retired shard (the routers' connect timeout:
	// the fence ends every open session): an instance the pause missed routes there until
	// its RELOAD, and a statement it sent just before lands once the shards open, where no
	// stream carries it (the simulator's cutover-windows world, window held).
	Grace int64
	// ReverseSettle, when positive, makes a reverse RELOAD the instances onto the old layout
	// before it opens it, and wait ReverseSettle ms between the two; zero opens first and does not
	// wait. Set it to at least PgDog's checkout_timeout (render.PgDogOptions.CheckoutTimeout;
	// PgDog's default is 5,000). The reverse CUTOVER ends maintenance for the whole of d
	// (pgdog/src/backend/replication/logical/orchestrator.rs, cutover) and leaves d on the
	// new layout, fenced: the clients it released are routed by that layout and wait,
	// either at its pools, which the swap rebuilt on the same addresses and so kept paused
	// (pool_impl.rs, move_conns_to), or for the cluster's schema to load, which the fence
	// keeps from ever happening (Cluster::wait_ready, pool/cluster/launch.rs; no
	// checkout_timeout there). d's RELOAD takes that cluster down and PgDog retries each
	// of them on the old layout with the shard index the new one gave it
	// (pgdog/src/backend/pool/connection/mod.rs, Connection::connect): on an open shard, a
	// write on another shard than its hash (PgDog 9918e963, the real reverse scenario, 3
	// of 6 runs). On a fenced one it waits for a login that fails until checkout_timeout
	// refuses it, so the old layout opens only once that is over.
	ReverseSettle int64
	// FinalizeAfter, when positive, finalizes on its own that many ms after every instance
	// has resumed, unless Reverse arrives first. Zero waits for Finalize or Reverse.
	FinalizeAfter int64
	// Mutants break the protocol on purpose, for the simulator's checkers to prove they
	// catch it. Never set them outside tests.
	Mutants Mutants
}

// Mutants are deliberate protocol bugs. Each one must trip a named invariant in a test.
type Mutants struct {
	// ReverseOpensAtOnce ignores ReverseSettle: a reverse opens the old layout before its
	// RELOAD, which retries there d's clients the reverse CUTOVER released, routed by the
	// new layout, with the new one's shard index. Trips "with the shard index the dst
	// layout gave it" (the world model).
	ReverseOpensAtOnce bool
	// SkipFence leaves the source shards writable (step 3 fences only the destination): a
	// router that missed the cutover keeps writing to the old shards. Trips "publish only
	// after every source shard is fenced".
	SkipFence bool
	// UnfencedDestination leaves the layout traffic moves to writable at step 3, as the
	// protocol once did: the designated instance writes there as soon as its CUTOVER swaps
	// it, before the new generation is published, and a CUTOVER that swapped and then
	// failed (or whose instance crashed and restarted) is rolled back with those writes
	// stranded where no stream carries them back. Trips "reach layout ... before it is
	// published" and "acknowledged writes lost" (the world model), and no-lost-ack in the
	// simulator.
	UnfencedDestination bool
	// OpenDestinationOnRollback unfences the destination with the source when a forward
	// cutover rolls back: a CUTOVER whose request lands after the machine gave up on it
	// swaps the designated instance again, and it writes to shards no stored generation
	// routes to. Trips "which no stored generation routes to" and "a rollback leaves the
	// destination fenced" (the world model).
	OpenDestinationOnRollback bool
	// SkipFinalReload opens the old shards at finalize without first reloading d onto the
	// published generation's files: d, restarted after its CUTOVER but before those files
	// were written, still routes to the old shards, and its writes land there once they
	// open. Trips "writes reach the src layout" and "acknowledged writes lost" (the world
	// model: TestMutantsTripInvariants and testdata/interaction/restart_instance.txt), and
	// no-lost-ack in the simulator's cutover-windows world (window restart, d's SHOW TASKS
	// failing so the check cannot tell).
	SkipFinalReload bool
	// SkipCheck goes to serving right after the forward resume without asking d whether
	// the reverse stream still runs: d, restarted after its CUTOVER but before the files
	// of g+1 were written, routes to the fenced old shards and has its writes refused for
	// the whole serving period, until finalize reloads it. Trips "serving ended with the
	// designated instance routing to the old layout" (the world model:
	// TestMutantsTripInvariants and testdata/interaction/restart_instance.txt), and
	// designated-writable in the simulator's cutover-windows world (window restart).
	SkipCheck bool
	// ReverseKeepsDesignated leaves d out of a reverse's RELOAD, as the machine once did,
	// trusting the reverse CUTOVER to have routed d back: PgDog's CUTOVER swaps the names
	// in the files d loaded, so d routes to the new layout still, fenced, and refuses
	// every write until finalize-time tooling reloads it. Trips "reversed but the
	// designated instance" (the world model: TestMutantsTripInvariants and
	// testdata/interaction/reverse.txt).
	ReverseKeepsDesignated bool
	// MissedForwardOnly lists in Done.Missed only the instances the forward pause missed,
	// as the machine once did: one a Reverse's pause missed goes unreported although the
	// fence refuses its writes. Trips "but Done.Missed is" (the world model).
	MissedForwardOnly bool
	// PublishBeforeCutover publishes g+1, writes files and reloads before CUTOVER on the
	// designated instance. Trips "publish only after CUTOVER succeeded".
	PublishBeforeCutover bool
	// ResumeBeforePublish resumes every instance right after CUTOVER, before g+1 is
	// published. Trips "resume only after the generation is published".
	ResumeBeforePublish bool
	// FilesBeforePublish writes the files (and reloads) before the compare-and-set that
	// publishes their generation: an instance restarting in between routes by a generation
	// the store does not have. Trips "files only for a published generation".
	FilesBeforePublish bool
	// ReverseReusesGeneration publishes the reverse at the source's old generation g
	// instead of g+2. Trips "generations only increase".
	ReverseReusesGeneration bool
	// SkipDesignatedReload rolls back without reloading the designated instance after a
	// CUTOVER that failed: if the CUTOVER had swapped its routing, it keeps writing to the
	// new shards, which the rollback leaves fenced: its writes are refused after the
	// rollback resumed it. Trips designated-writable in the simulator's cutover-windows world
	// (window swap-fails); testdata/interaction/mutants.txt shows it too.
	SkipDesignatedReload bool
	// RetryReusesStep sends every attempt of a step under the first attempt's step id, as
	// the machine once did: a late or repeated answer to an earlier attempt settles the
	// attempt in flight, so a rollback unfences a shard (or resumes an instance) while a
	// Fence (or Pause) on it is still out and can land after it. Trips "sent while ... is
	// in flight on shard" (and "on instance"), "resumed while shard ... is fenced" and
	// "left paused" (testdata/interaction/mutants.txt, TestMutantsTripInvariants), and, in
	// the world where a timed-out Fence's retry lands after the rollback's Unfence,
	// "resumed while shard ... is fenced" and a rolled-back source shard left fenced
	// (TestRetryHasItsOwnStep); released-writable in the simulator's cutover scenario
	// (faults backend.fence.fail_slow and ctl.reply.late).
	RetryReusesStep bool
	// SkipDrain sends CUTOVER without a drain (Cutover.Drain empty), as the machine once
	// did, trusting PgDog's own wait before its swap, which reads a lag refreshed once a
	// second: acknowledged writes the stream had not applied yet stay on the layout traffic
	// left. Trips "without draining" and "acknowledged writes lost" (the world model:
	// TestMutantsTripInvariants and testdata/interaction/mutants.txt, skip-drain).
	SkipDrain bool
	// SkipReverseDrain sends the reverse CUTOVER without a drain (the forward one keeps
	// its): what the new layout took while it served and the stream back had not applied
	// yet stays there when the reverse's swap ends that stream. Trips "without draining" and
	// "acknowledged writes lost" in a reverse (TestMutantsTripInvariants).
	SkipReverseDrain bool
	// SilentLostCopy rolls back a COPY_DATA that failed every try without an Alert, as the
	// machine once did: a try whose answer was lost may have started a task, which the undo
	// cannot stop since it never learnt its id, and it goes on replicating from its slot.
	// Trips "left syncing ... no Alert says so" (testdata/interaction/copy.txt,
	// TestMutantsTripInvariants).
	SilentLostCopy bool
	// AnyNewerStreamTakes reads a CUTOVER as taken whenever SHOW TASKS lists an active task
	// newer than the one it cut, as a reading that forgets PgDog lists every database's
	// tasks together would: another database's stream is taken for the reverse stream of
	// a CUTOVER that did not take. Trips "published before CUTOVER took effect" and "stops
	// another database's replication task" (the world model with a second database on d:
	// TestOtherDatabasesStreamIsNotTheCutovers).
	AnyNewerStreamTakes bool
	// CatchUpWhileSyncing counts the copy as caught up on the slot's lag alone, while the
	// task still copies: PgDog creates the slot when COPY_DATA starts, so its lag can be
	// under the threshold long before the copy ends, and a CUTOVER of a task that does not
	// replicate yet fails and rolls the cutover back. Trips "a reliable world reaches the
	// decision" (TestCatchUpWaitsForTheCopy, the world showing the slot's lag while syncing).
	CatchUpWhileSyncing bool
	// NoCatchUpDeadline sets no CatchUpDeadline timer: a copy whose stream never catches up
	// is polled for ever. Trips "no Done after the world turned reliable" (the world model
	// with a stream slower than the writes: TestCatchUpDeadlineEndsAStuckCopy).
	NoCatchUpDeadline bool
	// UndoUnfenceGivesUp gives the rollback's Unfence of a source shard up after Attempts
	// failures, like an ordinary command: the rollback resumes every instance onto a
	// source shard that refuses every write. Trips "shard ... fenced=true, want false"
	// (TestRollbackUnfenceRetriedUntilItSucceeds), and released-writable in the simulator's
	// cutover-undo world.
	UndoUnfenceGivesUp bool
	// UnresumedOnRetry lists in Done.Unresumed every instance whose RESUME needed a retry,
	// reading the op's failed attempts instead of its state: one whose retry was answered
	// OK is named as not resumed. Trips cutover-claims in the world model
	// (TestMutantsTripInvariants) and in the simulator's cutover scenario.
	UnresumedOnRetry bool
	// ReverseWithoutStream carries out a Reverse although no reverse stream is known (d
	// restarted after its CUTOVER, or the CUTOVER started none): every instance is paused
	// and both layouts fenced for a reverse CUTOVER of no task, which the listing after it
	// cannot settle. Trips converges in the simulator (the cutover scenario's corpus).
	ReverseWithoutStream bool
	// GraceFromSnapshot keeps, after a restart in the grace, the grace's deadline from the
	// snapshot instead of waiting it out again from the restart: a wall clock that jumped
	// forward while the daemon was down ends the grace at once, and the retired shards open
	// while a statement of a missed instance still travels there. Trips no-lost-ack in the
	// simulator's cutover-windows world (window held, grace_restart).
	GraceFromSnapshot bool
	// ResolveRenumbers numbers the listings that resolve a CUTOVER from 1 again for each
	// try: a late answer to the first try's listing, which says the task still waits for its
	// CUTOVER, is taken for the next try's, and a CUTOVER that took is read as not taken.
	// Trips "rolled back after the CUTOVER took effect" (TestResolveListingsNumberedAcrossTries).
	ResolveRenumbers bool
	// StaleReverseTrusted takes a reverse stream listed finished after a reverse CUTOVER
	// that failed for this round's CUTOVER, although an earlier round's reverse CUTOVER,
	// landing after that round rolled back, may have finished it while the new layout
	// served: the reverse then publishes the old layout without what the new one took since.
	// Trips "acknowledged writes lost" (TestStaleReverseCutAbandoned).
	StaleReverseTrusted bool
	// AdoptAnyTask adopts, after a restart with COPY_DATA in flight, the newest task SHOW
	// TASKS lists syncing or replicating, as the machine once did: another database's copy
	// running on d is cut over instead of this database's. Trips "cuts over another
	// database's task" and "published before CUTOVER took effect" (the world model with
	// another database's copy started before the restart's listing: TestAdoptsOnlyItsCopy,
	// TestMutantsTripInvariants; testdata/interaction/adopt.txt).
	AdoptAnyTask bool
	// StreamOfAnyDatabase takes the newest active task above the one CUTOVER cut for the
	// stream it started, whatever database SHOW TASKS names it for, as the machine once
	// did: another database's copy started on d after the CUTOVER is taken for the reverse
	// stream, stopped at finalize or cut over by a Reverse. Trips "stops another database's
	// replication task" and "cuts over another database's task" (the world model with
	// another database's copy started at the CUTOVER: TestStreamIsTheCutoversOwn,
	// TestMutantsTripInvariants).
	StreamOfAnyDatabase bool
	// StopGivesUp gives up finalize's STOP_TASK of the reverse stream after Attempts, as
	// a reverse's does, and finalizes all the same: a CUTOVER of a reverse rolled back
	// earlier, landing on the stream left running once the old shards are open, swaps d
	// onto them while the other instances write to the new ones. Trips "split brain"
	// (TestFinalizeStopsTheStreamBeforeTheOldShardsOpen; testdata/interaction/late_reverse.txt)
	// and, in the simulator's cutover-late-reverse, converges.
	StopGivesUp bool
}

func (o Options) withDefaults() Options {
	if o.LagThreshold <= 0 {
		o.LagThreshold = 1_000_000
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 1000
	}
	if o.CatchUpDeadline <= 0 {
		o.CatchUpDeadline = 6 * 3600 * 1000
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 500
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Grace <= 0 {
		o.Grace = 60_000
	}
	return o
}
