// Package indoubt watches a database's shards for prepared transactions left in doubt by
// PgDog's two-phase commit (§6.5 of the design), and alerts; it never resolves one.
//
// Every Options.Period (default 30s) a round lists every shard's prepared transactions
// (ListPrepared: pg_prepared_xacts) and the database's live router processes
// (ListInstances). When the round's replies are in, or at the next round, the monitor
// groups PgDog's transactions by coordinator instance and raises one alert per coordinator
// whose transactions are older than Options.Threshold (default 5 minutes) while the
// coordinator is gone (no live process has its instance id) or restarted (the process with
// that id started after the transaction was prepared, and the transaction is still
// prepared, so its recovery did not finish it). An alert is updated when its transactions
// change and cleared when none is prepared any more. Every raise and clear is acknowledged
// by the alert sink (Delivered) and sent again each round, and after a restart, until it is:
// an alert lost with a dying driver or refused by a sink that is down is not lost. A coordinator that runs and prepared
// the transaction itself is left alone, since PgDog retries COMMIT PREPARED every 333 ms,
// until Options.StuckAfter (default twice the threshold): a transaction still prepared then
// is alerted as stuck (ReasonStuck). Its prepare reached the shard after the coordinator
// died and restarted (the new process's recovery had run already: the simulator found it),
// or the coordinator cannot log in to finish it.
//
// # It cannot resolve
//
// Without the coordinator's log the monitor cannot know whether a transaction was decided,
// and guessing breaks atomicity (CrossShardCommit.tla). So its Command type has no way to
// express commit or rollback: the set of commands is closed (an unexported marker method)
// and none of them names an action on a transaction — TestCommandsCannotResolve checks
// every command type in the package by reflection, and the driver hands this machine only
// a read of prepared transactions. An operator resolves with the shard data in view, from
// the alert's Parts (shard, gid, owner, database: COMMIT/ROLLBACK PREPARED must run on that
// database, as the owner or a superuser, and while the owner is fenced only a superuser can).
//
// The simulator needs a monitor that does guess, to show its atomicity checker catches it.
// That mutant exists only in builds with -tags loam_mutant_indoubt_commit (mutant_commit.go
// adds a CommitPrepared command); a normal build has no such type at all.
//
// # Which gids are PgDog's
//
// PgDog names a transaction's branch on each shard
//
//	__pgdog_2pc_[<DEPLOYMENT_ID>_]<instance>_<random>_<shard>
//
// (reference/pgdog.md §4: the seed's form lacks the _<shard> suffix, which pg_prepared_xacts
// shows; SHOW TRANSACTIONS shows the name without it). ParseGID reads it from the right,
// since both ids may contain '_', and needs Options.Deployment to split the deployment from
// the instance. Not PgDog's, and alerted as foreign once older than the threshold: a gid
// without the prefix (an application's own PREPARE TRANSACTION, or another coordinator's);
// one with the prefix that does not end in two decimal numbers after a non-empty instance
// id; and, when Options.Deployment is set, one that does not carry it.
//
// Instance ids: with NODE_ID set (D306's StatefulSet, NODE_ID = pod ordinal) a restarted
// coordinator has the same id, and its start time tells the restart; without NODE_ID each
// process draws 8 random hex digits, so a restart shows as the old id gone. Start times come
// from the orchestrator (PgDog's admin database shows none) and are compared with prepare
// times from Postgres: clocks more skewed than the gap between the two misjudge a restart.
//
// A shard that cannot be read keeps the transactions of its last successful scan (nothing
// in doubt is forgotten because a scan failed) and after Options.BlindAfter failed rounds in
// a row raises an "unscanned" alert. A round without a roster raises no new gone or
// restarted alert (a missing roster must not read as "every coordinator is gone"), but it
// does raise stuck ones: a branch prepared StuckAfter ago is in doubt whoever runs, and a
// roster that stays down (the orchestrator's API) must not hide it.
//
// # The driver loop
//
//	m := indoubt.New(opts)                  // or Restore(snapshot, opts), then feed Restarted{}
//	cmds := m.On(ctx, indoubt.Track{Shards: names})
//	for {
//	    save(m.Snapshot())
//	    // ListPrepared → Prepared, ListInstances → Roster, SetTimer → TimerFired later,
//	    // Alert / ClearAlert → the alert sink, in order, then Delivered.
//	    cmds = m.On(ctx, nextReplyOrTimer())
//	}
//
// # Spec
//
// Spec CrossShardCommit (spec/tla/router/CrossShardCommit.tla). Actions: MonitorTrack,
// MonitorRound, MonitorScan, MonitorRoster, MonitorAlert, MonitorClear, MonitorDeliver,
// MonitorRestart.
package indoubt
