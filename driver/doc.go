// Package driver runs a machine from loam.dev/router/machine against the real seams: it
// executes each command through an adapter, feeds the reply back as an input, turns timer
// commands into timers, supplies the clock (the real one unless Config.Clock says
// otherwise) and a crypto-seeded random generator, writes SpecEvents as JSON lines to
// LOAM_SPEC_TRACE when it is set, logs with log/slog, and keeps the machine's snapshot in
// an adapters.BlobStore so a killed driver resumes. It has no protocol logic: what to do,
// when to retry and when to give up are the machine's.
//
// One Run is the loop of machine/doc.go, with one ordering rule taken from raft's Ready
// (save the state before sending the messages it produced):
//
//	m := restore or new                      // restored: feed kind.Restarted first
//	for {
//	    cmds := m.On(ctx, inputs that are ready)   // Now = Config.Clock, Rand = ChaCha8
//	    store.PutBlob("machine/<kind>/<id>", json(m.Snapshot()))   // BEFORE executing
//	    for each cmd: SetTimer → Config.Clock.At; CancelTimer → its stop;
//	                  anything else → kind.Exec.Execute in its own goroutine (or, when
//	                  kind.Ordered says so, on one worker in issue order)
//	    wait for a reply, a timer, an outside input, or ctx to end
//	}
//
// A driver killed at any point loses nothing and repeats nothing that had finished: every
// reply it fed was saved before the commands that followed were executed, and what was in
// flight is re-issued by the restored machine under the same step id and attempt, which an
// executor or the system behind it can recognise.
//
// # One active controller
//
// A daemon runs many machines and must be the only one running them. Lease keeps one
// controller active among those sharing a store: the holder renews a blob by
// compare-and-set, standbys take it once it has not changed for one TTL on their own clock.
// Every step a controller executes carries the lease: GuardedStore refuses the snapshot
// saves and record writes of a controller whose tenure ended, and Audited refuses to start a
// command without it. The store's compare-and-set on the snapshot version is the second
// guard: a new holder re-saves each machine's snapshot when it resumes it, so a deposed one
// that wakes cannot save over it.
//
// Audited also writes the audit log (who, what, when, result) of every command, read back
// with ReadAudit; Config.Drain stops a run gracefully, recording what was in flight.
//
// To run a new machine, write an Executor for its commands (one adapter call per command,
// no retries) and a Kind that names its constructors and its timer and restart inputs; see
// the Example. ConfigPush, InDoubt, Cutover and Failover are the kinds of the machines in
// this repository. A failover hands the generation it stored to a ConfigPush run through
// PushHandoff, which feeds that run's Inputs.
package driver
