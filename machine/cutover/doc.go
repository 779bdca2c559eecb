// Package cutover moves a PgDog database served by N instances from its source layout to
// a resharded target layout (§6.4 of the design), with a fence in the backend so that an
// instance that misses a step can fail a write but never lose one.
//
// PgDog's own RESHARD cuts traffic over on one instance only. The machine coordinates N:
//
//  1. Copy and catch up on the designated instance d: COPY_DATA into <db>__reshard_<g>
//     (rendered everywhere at generation g, unused by clients), then poll SHOW TASKS and
//     SHOW REPLICATION_SLOTS until the slot's lag is at most LagThreshold, within
//     CatchUpDeadline.
//  2. Pause <db> on every instance: new queries queue.
//  3. Fence the shards of both layouts: ALTER ROLE <app> NOLOGIN, then terminate the
//     role's sessions. An instance that still routes to a source shard now gets 28000 on
//     connect and 57P01 in flight: its writes fail instead of being lost. The destination
//     refuses the role until generation g+1 is published (step 5), because until then the
//     machine may still roll back: a CUTOVER can swap d's routing and then fail (PgDog
//     keeps the swap when saving the config fails), or d can crash after its swap and list
//     no task once restarted, and either reads as "did not take". d's CUTOVER clears its
//     holds, so d writes to the destination at once; a write it took there would be on no
//     shard the rollback serves, with no stream to carry it back. Replication (the copy,
//     the reverse stream) logs in as another role: the fence does not stop it.
//  4. Drain, then CUTOVER <task> on d: the driver waits until the copy's stream has
//     confirmed, on every source shard, everything that shard's WAL held once it was fenced
//     (Cutover.Drain, SlotDrain), and only then sends CUTOVER; d swaps the two databases'
//     names in memory and starts the reverse stream (new shards to old). This is the point
//     of no return. PgDog's own wait before its swap is not enough: it reads a lag its
//     stream refreshes once a second, and a stale 0 let the swap go with acknowledged
//     writes not yet on the destination (PgDog 9918e963, 2 of 8 runs under load, 64 and
//     120 writes; see the adapters/pgdog package doc).
//  5. Publish generation g+1 by compare-and-set, then open the destination (unfence its
//     shards), write the files, RELOAD every other instance.
//  6. Resume <db> on every instance, then check d: list its tasks; if the reverse stream is
//     gone, d restarted since its CUTOVER (a restart loses every task) and may route by the
//     files of g, so RELOAD it onto those of g+1 before serving.
//  7. Finalize (STOP_TASK the reverse stream, retried until it succeeds: PgDog takes the
//     CUTOVER of a running stream, and a rolled-back reverse's may still be on its way; then
//     RELOAD d onto the files of g+1, wait Grace,
//     clear the fence on the source, store g+2 without the reshard destination) or Reverse (steps 2–6 the other way:
//     pause, fence both layouts (the source is fenced already), drain the reverse stream on
//     the new shards and CUTOVER it, publish g+2 = the old layout, open the old shards, write the files, reload
//     every instance, d included, resume, check d the same way; the new shards stay
//     fenced). d is reloaded in a reverse because PgDog's CUTOVER swaps the names in the
//     config d loaded from its files, never in the one its forward CUTOVER made
//     (pgdog/src/backend/databases.rs, cutover, PgDog 9918e963): the reverse CUTOVER
//     leaves d on the new layout, and only the files of g+2 take it back.
//
// Before the point of no return any failure rolls back to serving the source: RELOAD d from
// the files of generation g if a CUTOVER was attempted (its swap lives only in d's memory),
// unfence the source, resume, stop the copy, give the record back to serving the source
// layout (at g+1, since dropping the reshard target changes the files; Done names the
// generation for ConfigPush). The destination stays fenced: nothing routes to it any more,
// and a CUTOVER that lands after the machine gave up on it cannot take writes there; the
// next cutover opens it once it publishes, and an Alert names its shards for an operator who
// gives the reshard up. After the point of no return there is no going back without the
// reverse stream: only forward, or Reverse.
//
// A source and a destination shard on one server cannot be fenced apart (a role belongs to
// the whole server), so Start refuses such a plan: put the destination on other servers.
//
// PgDog lists every database's tasks on an instance together (SHOW TASKS has no database
// column), and the machine tells its copy and its streams from others by task id: run one
// cutover per PgDog instance at a time (`loamrouter cutover plan` refuses a second). Only
// the CUTOVER's own answer, or its task listed finished, counts as the CUTOVER having
// taken; a newer active task beside a failed one may be another database's.
//
// # Defined outcomes
//
//   - A CAS conflict when publishing: if the stored record is the machine's own (a retry
//     whose first try landed), it carries on; if someone rewrote it without changing the
//     generation or phase, the write is made again on top of it; otherwise the machine halts
//     (Outcome Halted) with every instance paused and the shards of both layouts fenced.
//   - An instance unreachable at step 2 (other than d), in either direction, is listed in
//     Done.Missed and the cutover goes on: the fence keeps it off the layout traffic
//     leaves. d unreachable there rolls back.
//   - d restarting after its CUTOVER but before the files of g+1 were written reads the
//     files of g again and routes to the source, which the fence alone keeps its writes
//     off (the simulator found it). d is not reloaded at step 5 (see below); the check
//     after step 6 finds the reverse stream gone and reloads it then, so its writes are
//     refused from its restart to the end of the resume, not for the whole serving
//     period. If the check's listing fails, or its reload does (d is then in Lagging, with
//     an Alert), finalize reloads d, once the reverse stream is stopped, before the source
//     is unfenced; if that reload fails too, d is listed in Done.Lagging and the fence
//     stays. A restart loses the reverse stream: Reverse is refused from then on. In a
//     reverse, d restarting after the reverse CUTOVER, before the files of g+2, routes by
//     those of g+1 to the new shards the reverse leaves fenced, as it does without a
//     restart; the reverse's RELOAD of every instance takes it back (if that fails, d is
//     in Done.Lagging).
//   - An instance unreachable at step 5 is listed in Done.Lagging and still resumed: it
//     routes to fenced shards (errors, not lost writes) until it restarts and reads the
//     files, which are written before any RELOAD. Finalize then keeps the fence on.
//   - d not answering the PAUSE after its CUTOVER (repause) does not stop the cutover:
//     d already routes to the new shards, fenced until the publish, the old ones are
//     fenced, and the reverse stream carries what d writes back to them until finalize.
//   - A fence that fails on one shard rolls back: every source shard is unfenced again
//     (UnfenceWrites is idempotent) before any instance resumes, and only once the last
//     fence attempt on each has answered: an Unfence sent while a Fence is still out could
//     be overtaken by it, leaving the shard fenced under resumed instances. The
//     destination's shards the fence reached stay fenced.
//   - d's queries released by its CUTOVER (which clears every hold on d) reach the layout
//     traffic moves to, fenced until the publish: they fail with 28000 rather than write
//     where a rollback would strand them. The repause holds d's later queries, and the
//     layout is opened right after the publish, before the files and reloads, to keep that
//     window short.
//   - A late or repeated answer to an earlier attempt of a step (a timed-out call whose
//     reply turns up, a transport that delivers twice) is ignored: each attempt has its
//     own step id ("…#2"), and only the answer of the attempt in flight settles the step,
//     so no command is sent that an attempt still out could land after (an Unfence after
//     a Fence, a Resume after a Pause, a Fence of the next Reverse after an Unfence).
//   - A drain that fails (no slot of the stream on a shard, or its time runs out: the
//     stream has not applied what the shard took before the fence) is the Cutover's
//     failed answer, and CUTOVER was not sent: the listing below finds the task still
//     replicating, so the Cutover, drain included, is sent again up to Attempts, then the
//     cutover rolls back (a reverse is undone instead, ReverseAborted: the new layout
//     serves again, and Finalize or another Reverse may follow).
//   - A CUTOVER that fails, or whose answer was lost, is never sent again blindly: the
//     machine lists d's tasks. The copy task still waiting means it did not take (sent again
//     up to Attempts); finished, or a newer stream, means it did (a stream is a task SHOW
//     TASKS names "replication <db> -> <dst> (reverse)", StreamOf: d lists other databases'
//     tasks too); failed means roll back
//     (and RELOAD d first, because a swap may have happened before the failure).
//   - A daemon restart between any two steps: Restore the last Snapshot and feed
//     Restarted; every command still unanswered is sent again with the same step id, and
//     every timer is set again. Every command is idempotent except CUTOVER (see above) and
//     COPY_DATA, which after a restart first lists d's tasks: it adopts the active task
//     SHOW TASKS names this cutover's copy ("reshard <db> -> <db>__reshard_<g>", Task.Kind;
//     d runs other databases' copies too), sends COPY_DATA again when no task may be it,
//     and when it cannot tell (two such tasks, or one unnamed) rolls back with an Alert,
//     stopping nothing (AdoptAnyTask is the mutant that takes the newest active task).
//   - A COPY_DATA that fails every try without naming a task rolls back with an Alert
//     naming d and the slot: a try whose answer was lost may have started a task, and the
//     undo stops only tasks whose ids it learnt (SilentLostCopy is the mutant without it).
//   - Commands whose success is required (the record, the files, releasing a fence,
//     putting d back on the files' routing on a rollback) are retried until they succeed,
//     with an Alert once Attempts is exhausted; the fence and the holds keep every write
//     safe meanwhile. Finalize's RELOAD of d is tried Attempts times: if it fails, d is
//     listed in Done.Lagging and the source stays fenced instead.
//   - A CUTOVER that takes effect after the machine read it as failed (its request
//     arrived late) is safe too: d then routes to a layout that stays fenced until a
//     generation routing to it is published, and ConfigPush, which pushes the generation
//     Done names, puts d back on the files.
//   - A reverse CUTOVER that lands after its reverse was rolled back swaps d to the old
//     shards and finishes the reverse stream while the new layout serves: d's writes are
//     refused there (fenced), finalize keeps that fence if it cannot reload d, and a later
//     Reverse, finding the stream finished after a CUTOVER that failed, cannot tell it
//     from its own: it abandons (the old shards may miss what the new ones took since)
//     and refuses any further Reverse.
//
// # Facts that differ from the seed design
//
// The design (§6.4) names RESHARD and SHOW REPLICATION. PgDog's RESHARD cuts over on its own
// on one instance, so the machine uses COPY_DATA followed by an explicit CUTOVER <task>; and
// the resharding lag is in SHOW REPLICATION_SLOTS (SHOW REPLICATION is streaming-replica
// lag). CUTOVER acts on one instance and clears every maintenance hold on it, so d is paused
// again right after it (stage "repause"). RELOAD re-reads only the files PgDog was started
// with, so files are written first; PgDog reports no generation, so the machine's record is
// the truth and d is not reloaded after its CUTOVER until finalize has stopped the reverse
// stream (a reload would rebuild the pools the stream uses). PgDog lowercases every admin command, so the publication and the
// database must be lower case; the slot is named loam_<db>_<g> so a retried COPY_DATA can
// be recognised.
//
// # The driver loop
//
//	m := cutover.New()
//	cmds := m.On(ctx, cutover.Start{Record: rec, Plan: plan})
//	for !done {
//	    persist(m.Snapshot())      // before executing, so a restart resumes here
//	    for _, c := range cmds {   // independent: run them in parallel
//	        go execute(c)          // each answers with the input its doc names
//	    }
//	    in := next()               // an answer, a TimerFired, Finalize or Reverse
//	    cmds = m.On(ctx, in)
//	}
//
// After a crash: m := cutover.Restore(loaded); cmds := m.On(ctx, cutover.Restarted{}).
//
// # Spec
//
// Spec: Cutover. Actions: Start, Begin, CopyData, Adopt, Poll, CaughtUp, Timeout, Pause,
// Fence, Cutover, Resolve, Publish, Rebase, WriteFiles, Reload, Unfence, Resume, Check, Finalize,
// StopTask, GraceOver, FenceKept, Finish, Reverse, ReverseRefused, ReverseAborted, Rollback,
// Abandon, Restart, Halt, Done. Results of commands carry ok=true|false (and err when
// false); events of the reverse direction carry reverse=true.
package cutover
