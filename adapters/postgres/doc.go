// Package postgres reaches Postgres servers for the control plane: a ShardBackend for one
// shard's server (status, the write fence, prepared transactions, checksums for split
// verification), and, in the lsn*.go files, the LSN poller behind causal reads: it polls a
// server's progress on a connection of its own. What to do with that progress (which
// endpoint serves a causal read) is decided by machine/causal, driven by driver/causalread.
//
// # The fence
//
// A cutover must make a router that missed it unable to write to the old shards (§6.4 step
// 3). FenceWrites does it in Postgres itself: ALTER ROLE … NOLOGIN, so a new login of the
// application role fails with SQLSTATE 28000, then pg_terminate_backend on every session of
// the role until none is left, so an open session fails its next statement with 57P01 and
// its open transaction is rolled back. NOLOGIN alone is not a fence (open sessions keep
// writing), and neither is default_transaction_read_only (a client's BEGIN READ WRITE
// overrides it). A member of the role can SET ROLE to it and shows in pg_stat_activity under
// its own name, so members lose their logins and sessions too; a FenceMarker setting on each
// role records which fence took its login, so UnfenceWrites gives back exactly that.
// Superusers can act as any role and are never fenced.
//
// # Errors
//
// Every error is an *adapters.BackendError naming the server and the operation, keeping the
// SQLSTATE, and matching adapters.ErrFenced exactly when the fence refused (IsFenceError).
// Classify does the same for any pgx error, so a router or client branches on its own
// sessions' errors the way the control plane does.
//
// # Identifiers
//
// Role, table and column names reach SQL only through pgx.Identifier.Sanitize, and values
// that statements cannot take as parameters (ALTER ROLE … SET) only through pgx's
// simple-protocol literal quoting; nothing is pasted.
package postgres
