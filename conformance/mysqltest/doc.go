// Package mysqltest starts throwaway MariaDB servers for tests: a primary on a free port of
// 127.0.0.1 in its own temporary directory, replicas of it, each shut down and removed when
// the test that started it ends.
//
// MariaDB stands in for MySQL because it is what Debian ships; it speaks the same protocol
// and has the account lock, KILL, XA and read_only the MySQL adapter uses (its GTIDs have
// their own form, which the adapter reads too). Every test in this module that meets a real
// MySQL-protocol server goes through here, so that every such test skips or fails the same
// way:
//
//   - The programs mariadbd and mariadb-install-db come from LOAM_MARIADB_BIN (a directory
//     holding both), else from PATH, /usr/sbin and /usr/bin (Debian's mariadb-server).
//     Without them a test skips with a message starting "skipped: needs mariadb"; with
//     LOAM_REQUIRE_REAL=1 (CI) it fails instead.
//   - Every program runs with --no-defaults first, so nothing under /etc/mysql applies.
//     As root the server runs with --user=root; its directories are private temp dirs.
//   - mariadb-install-db runs once per test process, into a template data directory that
//     every server copies. Servers are independent, so tests (and packages run in parallel)
//     can start as many as they like.
//   - Servers are tuned for tests, not durability: no doublewrite, no flush at commit, no
//     binlog sync. Every server writes a binary log (ROW format, GTIDs, gtid_strict_mode),
//     so that replicas and positions work. root has no password and connects over TCP on
//     127.0.0.1 only.
//
// A package shares one server among its tests through Shared and gives each test its own
// database and accounts.
package mysqltest
