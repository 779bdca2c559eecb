// Package pglaunch starts throwaway PostgreSQL servers: a primary on a free port of
// 127.0.0.1 in its own temporary directory, and streaming standbys of it, for programs that
// need a real Postgres for a while and then none (loamrouter's demo; the tests, through
// conformance/pgtest, which wraps this package with testing.TB and skips).
//
//   - The binaries come from LOAM_PG_BIN (EnvBinDir), else the highest version under
//     /usr/lib/postgresql/*/bin (Debian's layout); without them Start fails wrapping
//     ErrNoBinaries, so a caller can tell the user what to install.
//   - Postgres refuses to run as root, so when the program runs as root the servers run as
//     the "postgres" user, their directories owned by it (ErrNoOwner when there is none).
//   - initdb runs once per process, into a template data directory that every server copies
//     (about a second, most of it the copy). Servers are independent: start as many as you
//     like, in parallel.
//   - Servers are tuned to be thrown away, not for durability: fsync, synchronous_commit and
//     full_page_writes are off. Authentication is trust, over TCP on 127.0.0.1 only, so
//     nothing off this machine can reach them; never point one at data you keep.
//
// Stopping is the caller's: Close stops a server (fast shutdown) and removes its files, Stop
// stops it and keeps them to look at; the postmaster gets SIGKILL if the process that
// started it dies first.
package pglaunch
