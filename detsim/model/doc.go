// Package model holds the simulator's in-memory models of the systems Loam Router's
// adapters talk to: the shard map store (Store, which passes the same contract suite as
// the real stores through StoreSeam), the rendered files target (Files, a ConfigMap with
// its generation annotation), PgDog instances (Router: generation, routing table, paused
// databases, pooled sessions, COPY_DATA and CUTOVER tasks with their replication streams,
// a 2PC Coordinator with a log that a crash can lose) and shard backends (Backend: rows,
// roles with login on or off, sessions that end when fenced or restarted, prepared
// transactions that survive restarts).
//
// What is simplified, and may differ from the real systems: replication slots are kept per
// instance, in its tasks (a COPY_DATA naming a slot starts a task as PgDog's does, reusing
// the slot, and one task streams through a slot at a time; a slot left on the source by an
// instance that crashed is not modelled, nor a reused slot's position); logical replication is exactly-once and carries
// only client writes (origin filtering); the routers' files are a small line format, not
// pgdog.toml; roles have no members.
//
// Models run inside the simulator's events: a network handler calls a model method, which
// answers at once or schedules what happens later on the Sim. They evaluate the fault
// points the catalogue (detsim.Catalogue) lists under their names, and record histories
// (accepted writes, fences, resolutions, loads, record writes) that the checkers read.
package model
