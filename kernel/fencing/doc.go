// Package fencing is the fenced session directory as pure functions: each script version of
// the key migration (O, A, B, backfill, C) applied to a snapshot of the keys it touches, with
// lease expiry by a clock the caller supplies.
//
// Why it exists: the directory keeps, per session, a lease (who may act, with which fencing
// generation) and a generation counter that never expires and must never repeat. Cluster mode
// needs both keys in one hash slot, so they are renamed to a hash-tagged pair while pods run
// mixed script versions. The Lua scripts in loam.dev/router/adapters/valkey are the real thing;
// this package is their meaning, used three ways:
//
//   - the differential test runs the same random calls here and against a real server through
//     the Lua scripts and requires identical replies and identical keys;
//   - a simulator (and the exhaustive explorer in this package's tests) drives Apply from
//     several pods under per-pod upgrade interleavings and checks T1–T3 after every step;
//   - the mutants M1–M5 of the seed's table are options of Apply (M4 is the phase gate, see
//     GateC), each shown to trip its invariant in a test.
//
// The versions, as the seed states them (old keys: buzz:<community>:tunnel:<session>:lease and
// :generation; new keys: buzz:tunnel:{<community>:<session>}:lease and :generation):
//
//	O  acquire checks the old lease; generation = INCR old counter; lease on the old key.
//	A  acquire checks both leases; generation = max(old, new)+1 written to both counters;
//	   lease on the old key.
//	B  acquire checks both leases; generation = max(old, new)+1 written to the new counter;
//	   lease on the new key.
//	backfill  new counter = max(old, new); idempotent; run once the whole fleet runs B.
//	C  acquire checks the new lease; generation = INCR new counter; lease on the new key.
//
// Renew, release and validate act on the key the caller's lease names and never create
// authority. O only knows old keys and C only new keys; A and B accept both, because a pod
// upgraded while holding a lease keeps renewing it where it was written.
//
// Session ids are free text, with one exception: an id that makes the new keys' hash tag
// empty (a community starting with "}") would put the new pair in two slots; CheckSession
// refuses it, and the adapter calls it before every script.
//
// Time: a lease written with ttl at now is live while now < now+ttl (Redis deletes a key with
// PX ttl at that instant). Generation counters never expire. Values are what the Lua scripts
// store: a lease is "<owner>:<generation>", a counter is the decimal generation.
package fencing
