// Package pgdog is the RouterInstance for PgDog: it drives one PgDog instance through its
// admin database (RELOAD, PAUSE, RESUME, MAINTENANCE, SHOW POOLS/CONFIG/TASKS/
// REPLICATION_SLOTS/VERSION/PEERS, COPY_DATA, RESHARD, CUTOVER, STOP_TASK) and decodes the
// replies into typed rows.
//
// What shapes it, from PgDog's admin database as documented in the project's pgdog.md
// (PgDog 0.1.54):
//
//   - Only the simple query protocol is accepted, one command per Query message, semicolons
//     stripped. The adapter sends each command as one Query message over pgx's pgconn and
//     never uses the extended protocol.
//   - The whole command is lowercased before parsing and arguments are split on single
//     spaces, so every name (database, publication, slot) is checked by CheckName before
//     sending: "PAUSE App" would pause "app".
//   - A command PgDog cannot parse gets a non-fatal ErrorResponse with SQLSTATE 08P01
//     (ErrSyntax). A command that fails while running gets a FATAL ErrorResponse with
//     SQLSTATE 58000 and the connection is closed (ErrExecution; recorded: RELOAD of a bad
//     file, CUTOVER of a task that is not replicating, COPY_DATA/RESHARD of a database
//     without a schema owner); the adapter reconnects for the next command.
//   - A wrong admin password is refused with FATAL 28000, not Postgres's 28P01
//     (recorded): ErrLogin matches SQLSTATE class 28, never a single code. Every error is an
//     *adapters.RouterError keeping the SQLSTATE; one that means the instance could not be
//     reached, or the connection broke under a command, matches adapters.ErrUnreachable.
//   - RELOAD re-reads only the files the process was started with (--config, --users), and
//     no command accepts config content. Apply therefore writes the rendered files into the
//     instance's directory (Config.Dir) through adapters/configmap, whose links switch to a
//     whole new generation at once and refuse to go back to an older one, then sends RELOAD.
//   - PgDog has no config generation and SHOW CONFIG shows [general] values only. The
//     generation is read from SHOW POOLS instead: kernel/render's files create a marker
//     pool (database <db>__generation_<g>, user __loam_generation) that exists only when both
//     files of generation g are loaded (render.GenerationFromPools). Apply fails with
//     ErrNotLoaded when RELOAD succeeded but the marker does not show.
//   - Maintenance holds survive RELOAD and no command reports them; CUTOVER and the end of
//     any cutover on an instance clear all of them.
//
// What a real PgDog answered (PgDog 3ee07ab0, recorded in testdata/transcript*.json) and
// the adapter relies on:
//
//   - Task ids start at 0 after every start: the first COPY_DATA answers task_id 0, so 0 is
//     a task (machine/cutover holds a has-task flag, never 0 for "none").
//   - SHOW TASKS's type column describes the task ("reshard app -> app__reshard_4"; a
//     subtask "schema_sync(pre) app -> app__reshard_4"), also for COPY_DATA: it is kept as
//     adapters.Task.Kind for reports and never decided on.
//   - Column types: SHOW POOLS id int8 (20), port, shard and the counters numeric (1700),
//     paused/banned/healthy/online/schema_admin bool (16) spelled t/f; SHOW TASKS id and
//     elapsed_ms int8; COPY_DATA's task_id and replication_slot text (25). The adapter reads
//     every cell in text format and parses it, so it depends on the spelling only.
//   - Tags: SHOW POOLS, SHOW TASKS, SHOW VERSION, SHOW REPLICATION_SLOTS, SHOW PEERS are
//     tagged with their whole name, SHOW CONFIG with SHOW alone; the adapter checks the tag
//     of the commands without rows only (their first word is the verb).
//   - STOP_TASK answers "task not found" for a task that failed as well as for an unknown
//     id, and OK only for one it cancelled: the cutover's StopTask takes both as done.
//   - The extended protocol is refused with FATAL 58000 "simple protocol supported only"
//     and the connection closed.
//   - COPY_DATA needs Postgres 16 or newer on the source: its schema sync calls
//     pg_get_publication_tables(text[]), which Postgres 15 lacks (the task fails with 42883).
//
// Where each fact is in PgDog's public source (github.com/pgdogdev/pgdog, AGPL-3.0, read
// at commit 3ee07ab0, 2026-08-14, crate 0.1.53; never copied):
//
//   - pgdog/src/admin/server.rs: a message other than Query is refused (Error::SimpleOnly);
//     the query is lowercased whole before admin/parser.rs parses it; a parse error is
//     answered with ErrorResponse::protocol_violation (ERROR, 08P01) and the connection
//     stays; the reply ends with CommandComplete carrying the command's name().
//   - pgdog/src/backend/pool/connection/binding.rs and pgdog/src/frontend/client/mod.rs
//     (spawn_internal): an error while a command runs goes up through the client, which
//     sends ErrorResponse::from_client_err (FATAL, 58000, pgdog/src/net/messages/
//     error_response.rs) and ends the connection. The extended-protocol refusal takes the
//     same path, so it is FATAL 58000 too (the adapter never sends the extended protocol).
//   - pgdog/src/admin/reload.rs and pgdog/src/backend/databases.rs (reload): RELOAD loads
//     config_path and users_path, the paths the process was started with, and replaces the
//     databases only once both parsed.
//   - pgdog/src/admin/pause.rs, maintenance_mode.rs, cutover.rs, stop_task.rs: the tags are
//     PAUSE, RESUME, "MAINTENANCE ON|OFF [database]", CUTOVER, STOP_TASK.
//   - pgdog/src/api/async_task.rs (TasksMap.next_id): task ids are a counter from 0.
//   - pgdog/src/net/messages/error_response.rs (ErrorResponse::auth): FATAL 28000 for a
//     wrong password; pgdog/src/admin/show_config.rs: the SHOW tag; pgdog/src/admin/
//     show_pools.rs: Field::bigint/numeric/bool, the column types above;
//     pgdog/src/admin/stop_task.rs: OK only when cancel_task found a task to cancel.
//   - pgdog/src/admin/copy_data.rs: COPY_DATA <from> <to> <publication> [slot], arguments
//     split on single spaces; the schema is synced with pg_dump (pg_dump_path, default
//     "pg_dump" on PATH; pgdog/src/backend/schema/sync/pg_dump.rs).
//   - pgdog-config/src/general.rs: host and port default to PGDOG_HOST and PGDOG_PORT
//     (0.0.0.0:6432 without them) when pgdog.toml leaves them out, as kernel/render's files
//     do; conformance/pgdogtest relies on it to listen on 127.0.0.1.
//
// What PgDog 9918e963 (2026-08-07, crate 0.1.52; read at that commit, never copied) does
// that the adapter follows, found running it (adapters/pgdog's TestRealPgDog tests):
//
//   - CUTOVER only requests the cutover. pgdog/src/admin/cutover.rs answers one row "OK"
//     (column cutover, text) as soon as pgdog/src/api/replication.rs
//     (ReplicationTask::trigger_cutover) finds the task registered, which it stays until
//     the task ends: a CUTOVER sent again meanwhile is answered OK and changes nothing.
//     The task then (pgdog/src/backend/replication/logical/orchestrator.rs,
//     ReplicationWaiter::cutover) waits for the lag to be under
//     cutover_traffic_stop_threshold, turns maintenance mode on for the whole instance and
//     cancels the source's running queries, waits for the lag to be under
//     cutover_replication_lag_threshold or the last replicated transaction to be older than
//     cutover_last_transaction_delay (or cutover_timeout, then cutover_timeout_action),
//     swaps the two names, starts the reverse stream as a new root task and turns
//     maintenance off; only then does the COPY_DATA task finish. A STOP_TASK before the
//     swap aborts it; after it, the swap runs to completion. Cutover therefore returns
//     once SHOW TASKS lists the task finished, and fails (ErrExecution) when it ends
//     otherwise.
//   - The cutover's stage is on a subtask: pgdog/src/api/resharding.rs runs the
//     replication as a child task (ctx.run) that reports "cutting over", "rolling back" or
//     "stopping" (pgdog/src/api/replication.rs, ReplicationStatus) while the root row
//     still says "replicating"; pgdog/src/admin/show_tasks.rs lists each root task, newest
//     first, followed by its subtasks, whose id is NULL. Tasks gives a root task its
//     running subtask's stage (RootTasks).
//   - The COPY_DATA row says "replicating" before the stream is set up
//     (pgdog/src/api/resharding.rs sets the stage, then orchestrator.replicate(), then the
//     replication subtask registers for CUTOVER): a CUTOVER sent in between fails with
//     "task is not a replication task" (seen: three tries within 50 ms, then the
//     machine rolled back). Tasks reports such a task's InnerStatus as "" until its
//     replication subtask is listed running.
//   - PgDog's cutover goes at once when its stream has applied no transaction yet
//     (orchestrator.rs, should_cutover: no last transaction counts as quiet), whatever
//     the lag: rows written just before were missing on the destination after it (seen:
//     a test's key 22). The machine sends CUTOVER only once the measured lag is under
//     LagThreshold and every instance is paused; callers of Cutover must do the same.
//   - One slot per source shard: pgdog/src/backend/replication/logical/publisher/slot.rs
//     (ReplicationSlot::replication) names the slot of source shard i <slot>_<i>, and SHOW
//     REPLICATION_SLOTS (pgdog/src/admin/show_replication_slots.rs) lists each with
//     lag_bytes (bigint), never the name COPY_DATA was given: SlotLag takes the largest
//     lag of the task's shard slots, and knows none while one source shard's slot is
//     missing (TaskSlotLag; the cutover machine's PollCopy says how many). lag_bytes is 0 from the slot's creation
//     (pgdog/src/backend/replication/logical/status.rs, ReplicationSlot::new) until the
//     stream measures it, once a second (publisher/publisher_impl.rs; slot.rs
//     replication_lag: pg_current_wal_lsn() - confirmed_flush_lsn), so a 0 early in
//     "replicating" may be unmeasured; the CUTOVER waits for the real catch-up itself
//     (above), so a pause begun too early costs pause time, not writes.
//   - Slot names belong to the Postgres server, and a logical slot to the database that
//     made it: a slot a stopped copy leaves behind (seen: loam_app_2_0 after a rolled-back
//     run whose PgDog stopped before its stream drained) fails the next COPY_DATA naming
//     it from another database with 55000 "replication slot ... was not created in this
//     database". The real tests drop their databases' slots when they end; the cutover
//     machine's slot name carries the generation (loam_<db>_<g>).
//   - CUTOVER swaps the names in the config PgDog loaded from its files and never keeps
//     the swapped one: pgdog/src/backend/databases.rs (cutover) clones config(), swaps,
//     builds the databases from it, and stores neither (config::set is not called; the
//     files are rewritten only with cutover_save_config, which kernel/render turns off).
//     So a second CUTOVER (the reverse stream's) without a RELOAD in between routes the
//     instance where the first did, and anything that rebuilds the databases from
//     config() (reload_from_existing: a server error 0A000 through a client,
//     pgdog/src/frontend/client/query_engine/hooks/schema.rs; a passthrough-auth user
//     added) puts the instance back on its files' routing. machine/cutover therefore
//     RELOADs the designated instance onto the files of the generation a reverse
//     publishes instead of relying on the reverse CUTOVER's swap.
//   - PAUSE <db> pauses every user's pools of the database, the schema admin's too
//     (pgdog/src/admin/pause.rs), and a pool rebuilt on the same addresses by a RELOAD or
//     a swap inherits the pause (pgdog/src/backend/pool/pool_impl.rs, move_conns_to). The
//     reverse CUTOVER's swap rebuilds the source's pools where they were (above), and the
//     reverse-of-the-reverse stream it then sets up checks connections out of the
//     source's schema admin pools (publisher_impl.rs, sync_tables, create_slots): paused,
//     its task failed "pool: checkout timeout" after the swap. A query held at a paused
//     pool was routed already: when a RELOAD or a swap takes that pool offline, PgDog
//     retries it on the new cluster with the shard index the old layout gave it
//     (pgdog/src/backend/pool/connection/mod.rs, Connection::connect), which put
//     acknowledged rows on the destination shard with their source shard's index (1 to
//     6 of 700 to 4,000 per run, 2026-12-02). Pause therefore sends MAINTENANCE ON <db>
//     first, which holds a client before its request is routed
//     (pgdog/src/frontend/client/mod.rs, client_messages) and survives RELOAD, then
//     PAUSE <user> <db> for the client users only; Resume sends RESUME <db>, then
//     MAINTENANCE OFF <db>.
//   - A client of d that its CUTOVER released (the cutover ends maintenance for the whole
//     instance: maintenance_mode::stop(None) at the end of ReplicationWaiter::cutover,
//     pgdog/src/backend/replication/logical/orchestrator.rs) is routed by the layout the
//     swap made. After the reverse CUTOVER that is the new layout again (the swap is of the
//     files' config, above), fenced for good: the client waits at its pools, rebuilt on
//     the same addresses and so still paused (move_conns_to, above), until
//     checkout_timeout refuses it, or, before it routes, for the cluster's schema to load
//     (QueryEngine::cluster_check, Cluster::wait_ready in pool/cluster/launch.rs; a
//     cluster of more than one shard loads it, here through the fenced role), with no
//     checkout_timeout. d's RELOAD shuts that cluster down, which releases the waiters
//     (Cluster::shutdown), and PgDog routes them by the cluster they hold and retries them
//     on the reloaded one with that shard index (Connection::connect above). Seen in the
//     reverse scenario (2026-12-03, 3 of 6 runs failed): acknowledged writes of d's on
//     the source shard with their 3-shard hash's index, on no destination shard (key
//     17179869791: hash 1 of 2, 0 of 3, on source shard 0; written 3.41 s after the first
//     fence, in the reverse pause, acknowledged 4.52 s, just after d's RELOAD), and d's
//     other held writes refused "no such shard: 2". A wait before the RELOAD
//     (checkout_timeout + 100 ms) turned the pool waiters into "checkout timeout" refusals
//     but not the others (2 of 8 runs failed: keys held from the reverse pause, or from a
//     reconnect after the forward fence's 57P01, until the RELOAD). machine/cutover's
//     Options.ReverseSettle therefore reloads before it opens the old layout and waits between:
//     the retried writes wait for a login the fence refuses until checkout_timeout ends
//     them (8 of 8 reverse runs passed, 2026-12-03).
//   - CUTOVER can swap before its stream applied the last writes. should_cutover
//     (orchestrator.rs) goes once the lag is at most cutover_replication_lag_threshold,
//     but the lag it reads is the map the stream refreshes once a second
//     (publisher/publisher_impl.rs, check_lag interval; set_replication_lag), so a 0
//     measured before the last writes lets the swap go, and waiter.stop() ends the stream
//     without applying what is left. Seen (2026-12-03, forward, 1 run of 3 and 1 of 4):
//     64 and 120 acknowledged writes, made 170 to 200 ms before the fence, on the source
//     and not on the destination (logMissing); in a reverse, 47 missing from the source.
//     The machine therefore drains before it sends CUTOVER, in both directions, without
//     that lag: machine/cutover's Cutover names, for every shard traffic leaves (fenced by
//     then), the copy's slot name, and the driver waits with
//     adapters/postgres.Backend.AwaitSlotDrain until every logical slot of the stream in
//     that shard's database has confirmed_flush_lsn at or past the shard's
//     pg_current_wal_insert_lsn(), read once at the start of the wait; only then is
//     CUTOVER sent. What that rests on: the stream confirms a transaction to its slot only
//     once it has committed it on every destination shard (publisher/publisher_impl.rs
//     sends the status update subscriber/stream.rs builds from committed_lsn), and it
//     answers a keepalive outside a transaction with the keepalive's WAL end, so an idle,
//     caught-up stream confirms the end of the WAL; the slots of source shard i are named
//     <slot>_<i> (slot.rs above), and the reverse stream the forward CUTOVER starts
//     reuses the orchestrator's slot name (orchestrator.rs, cutover: refresh_publisher
//     with replication_slot), so on the destination's shard j it is <slot>_<j> again. The
//     drain matches the slots named <slot> or starting with <slot>_ in the shard's
//     database, which covers that and the reference router's <slot>_<i>_<j>; a slot of
//     that name a stopped copy left behind in the same database never advances, so the
//     drain times out and CUTOVER is not sent (refused, not lost). Seen with it
//     (2026-12-03, TestRealPgDogFencedCutoverUnderLoad -count=3): 0 acknowledged writes
//     lost in 3 forward runs, 3 rollbacks and 3 reverses; without it (SkipDrain, 4 runs
//     each) one forward lost 59.
//   - Seen and not yet explained (the fenced cutover under load, TestRealPgDogFenced...):
//     once, an accepted CUTOVER whose task stayed running/replicating for four minutes
//     (2026-12-02).
//
// The package's tests run the adapter against a protocol-level stand-in built with
// pgproto3 (standin_test.go; tests named TestStandIn), which replays what a real PgDog
// answered (testdata/transcript*.json: columns, types, tags, errors, closes, value forms)
// and refuses, naming it, any command no recording holds, and, with LOAM_PGDOG_BIN set,
// against real PgDog instances (conformance/pgdogtest; tests named TestRealPgDog, on real
// Postgres through conformance/pgtest). TestRealPgDogTranscript records what a real PgDog
// answered to every admin command into testdata/transcript.json (-record);
// transcript_test.go holds the format and the check, Transcript.conform.
package pgdog
