// Package pgtest starts throwaway PostgreSQL servers for tests: pglaunch's servers (a
// primary on a free port of 127.0.0.1 in its own temporary directory, streaming standbys of
// it), each stopped (fast shutdown) and removed when the test that started it ends, with
// helpers that fail the test instead of returning errors.
//
// It is the one way tests in this module meet a real Postgres (the Postgres adapter, causal
// reads, the merge and hash differential tests), so that every such test skips or fails the
// same way:
//
//   - The binaries come from LOAM_PG_BIN, else the highest version under
//     /usr/lib/postgresql/*/bin (Debian's layout). Without them a test skips with a message
//     starting "skipped: needs postgres"; with LOAM_REQUIRE_REAL=1 (CI) it fails instead.
//   - Postgres refuses to run as root, so when the test runs as root the servers run as the
//     "postgres" user, their directories owned by it; without that user the test skips too.
//   - initdb runs once per test process, into a template data directory that every server
//     copies (about a second here, most of it the copy). Servers are independent, so tests (and
//     packages run in parallel) can start as many as they like.
//   - Servers are tuned for tests, not durability (pglaunch's settings): fsync,
//     synchronous_commit and full_page_writes are off. Authentication is trust, over TCP on
//     127.0.0.1 only.
//
// A typical package shares one server among its tests through a sync.Once-style helper and
// gives each test its own database with CreateDatabase.
//
// Programs that want the same throwaway servers outside a test (loamrouter's demo) use
// pglaunch itself, which returns errors instead of skipping and leaves stopping to them.
package pgtest
