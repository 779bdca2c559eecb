// Package refrouter is the reference router: the smallest honest stand-in for PgDog's
// routing, so that the control plane (ConfigPush, the cutover with its backend fence) can be
// exercised end to end on real Postgres where PgDog itself cannot run.
//
// A Router is an adapters.RouterInstance. Like a PgDog process it reads pgdog.toml and
// users.toml from its directory when it starts and again on every reload, and nothing else:
// Apply writes the rendered files there (through adapters/configmap, a whole generation at
// once) and reloads, so an instance that restarts comes back on the files the last Apply
// wrote. From the files it takes, per
// [[databases]] name, the primary of each shard (the shard count is the highest shard
// number plus one, as in PgDog), the [[sharded_tables]] key with its data_type and mapping
// rules, and the users.toml passwords; the generation is the kernel/render marker
// (<db>__generation_<g> with user __loam_generation), which is also how the PgDog adapter
// reads an instance's generation from SHOW POOLS.
//
// Clients call Exec (or Query) with the value of the sharding column: the statement goes to
// one shard's primary, chosen by PgDog's default postgres hasher, which is Postgres hash
// partitioning (kernel/pghash), or by the list and range rules. It runs in a pgx pool per
// shard, logged in as the router's user, so a backend fence on that role (NOLOGIN, sessions
// terminated) refuses the router: Exec fails with adapters.ErrFenced (SQLSTATE 28000 or
// 57P01). While a database is paused, Exec waits; the shard is chosen when Resume releases
// it, by the routing loaded then, which is what makes PAUSE, RELOAD, RESUME move queued
// statements to the new shards.
//
// What it does not do, and PgDog does: parse SQL (the caller names the key), scatter a
// statement whose key has no single shard (it refuses with ErrNoRoute instead), read from
// replicas, two-phase commit, TLS, maintenance mode, and the resharding tasks (COPY_DATA,
// CUTOVER): end-to-end tests stand in for those with Postgres's own logical replication.
//
// Server puts one instance on the Postgres wire, on one loopback listener as PgDog does:
// PgDog's admin database (RELOAD, PAUSE, RESUME, SHOW POOLS with the generation marker,
// SHOW TASKS and REPLICATION_SLOTS, COPY_DATA, CUTOVER, STOP_TASK, in the reply shapes
// adapters/pgdog decodes), so a controller in another process drives it with the PgDog
// adapter; and client sessions, whose statements name their key in a leading comment
// (/* pgdog_sharding_key: k */, ParseShardingKey) and are relayed to the shard, a fence's
// SQLSTATE included. Logins are SCRAM-SHA-256 against the loaded files' passwords; it
// serves no TLS, so it refuses addresses off loopback. cmd/refrouter runs it as a process
// and StartNetLoad writes through such processes.
//
// Fleet runs N instances of one database, each with its own directory, and is the
// adapters.ConfigTarget that writes into all of them, as a ConfigMap every pod mounts.
// StartLoad runs client goroutines writing through them, recording every outcome
// (acknowledged, refused by a fence, failed) for the checks a cutover test makes.
package refrouter
