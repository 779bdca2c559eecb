// Package redistest starts throwaway Redis (or Valkey) servers for tests: a standalone node
// (cluster mode disabled, where the migration's phases O, A and B run) and an N-primary
// cluster, on free 127.0.0.1 ports in temp dirs, stopped in t.Cleanup. It also moves a hash
// slot between primaries by hand, phase by phase, so a test can hold a slot half-migrated and
// watch ASK and TRYAGAIN.
//
// Why not a shell script: tests own their servers. Each test gets fresh nodes it can break,
// started from the binary on PATH (Debian's redis-server in CI; LOAM_REDIS_SERVER may name
// another, e.g. valkey-server), and never touches a server it did not start.
//
// When the binary is missing, Require skips the test with "skipped: needs redis-server",
// unless LOAM_REQUIRE_REAL=1 (set by CI), which makes it fail instead.
package redistest
