// Package configpush moves every router instance of one database to the generation the
// shard map store publishes (§6.3 of the design): write the rendered files where every
// instance reads them, RELOAD each instance, and confirm what each instance routes by.
//
// # The rule it keeps
//
// An instance that restarts reads whatever files are in place, at any moment. So files for
// generation g are written only when any instance may route by g: when the store publishes
// g (§6.4). A Push therefore carries the record as the store returned it, and the machine
// refuses a Push whose generation is not that record's Generation — files rendered for a
// reshard target (State.To) before the cutover published it, a record that was never stored,
// a generation older than one already written. Generations written only increase, and at
// most one files write is in flight at a time. Options.Mutant breaks these rules on purpose
// for the simulator's checkers; it is never on by default.
//
// # Facts that differ from the seed
//
// The design (§6.3) reads as if RELOAD carried the configuration and SHOW CONFIG reported
// the generation. PgDog, as measured (reference/pgdog.md):
//   - RELOAD re-reads only the files PgDog was started with (--config, --users), so the
//     files are written first (WriteFiles, once for all instances) and only then is each
//     instance reloaded (Reload, after FilesWritten succeeded).
//   - PgDog has no config generation: SHOW CONFIG lists [general], [tcp] and [memory] only.
//     The observed generation is inferred by the adapter from what SHOW POOLS shows of the
//     rendered files, and may be unknown; the machine reports such instances as Unknown
//     instead of pretending they are confirmed.
//   - Admin commands are lowercased and one per query message; that is the adapter's
//     concern (the machine names no SQL).
//
// # Steps, ids, retries
//
// A push of generation g has one files step, "g<g>/files", then per instance a reload step
// "g<g>/reload/<id>" followed by an observe step "g<g>/observe/<id>". Every step runs in
// attempts: a reply that fails, or no reply by the step's deadline (Options.StepTimeout),
// fails the attempt; the next one is issued after a backoff doubling from Options.Backoff up
// to Options.MaxBackoff, jittered from ctx.Rand. After Options.MaxAttempts an instance is
// Stuck: it is reported in the Outcome and the push finishes without it (the files are in
// place, so it routes by g whenever it restarts). Instances progress independently and in
// parallel. A success from any attempt of the running step is taken (it is the same
// request, so the same effect); a failure counts only for the attempt awaited.
//
// A newer Push supersedes the push in progress: its timers are cancelled, its Outcome says
// SupersededBy, and its late replies are ignored (their step ids name the old generation).
// If its files write is still out, the newer write waits until it answers or its deadline
// passes, so two writes are never in flight together.
//
// # The driver loop
//
//	m := configpush.New(opts)             // or Restore(snapshot, opts), then feed Restarted{}
//	cmds := m.On(ctx, configpush.Push{Record: rec, Generation: rec.Generation, Files: files, Instances: ids})
//	for {
//	    save(m.Snapshot())                 // before executing: a crash re-issues, never loses
//	    for _, c := range cmds {
//	        // WriteFiles → FilesWritten, Reload → Reloaded, Observe → Observed,
//	        // SetTimer/CancelTimer → TimerFired later, Outcome → report; all in parallel.
//	    }
//	    cmds = m.On(ctx, nextReplyOrTimer())
//	}
//
// # Spec
//
// Spec ShardMap (spec/ShardMap.qnt). Actions: Push, Refuse, WriteFiles, FilesSeen, Reload,
// Observe, Timeout, Retry, GiveUp, Supersede, Done, Restart (see the Act constants for each
// one's fields). WriteFiles, Reload and Observe are emitted when the reply arrives, with
// ok=true or false, because that is when the world is known to have changed.
package configpush
