// Package vitesstest runs a real Vitess for tests: vitesslaunch's cluster (etcd, vtctld, one
// vttablet per shard on its own MariaDB, vtgate, on 127.0.0.1; see that package for what it
// can and cannot do on stock Vitess v0.24.4 and MariaDB), stopped and removed when the test
// that started it ends, with helpers that fail the test instead of returning errors.
//
// Without the programs (LOAM_VITESS_BIN, built by conformance/vitesstest/vitessbin/build.sh;
// Debian's etcd-server and mariadb-server) a test skips with a message starting
// "skipped: needs vitess"; with LOAM_REQUIRE_REAL=1 (CI) it fails instead.
//
// A package shares one cluster among its tests through Shared; Start gives a test its own.
// Programs that want the same throwaway Vitess outside a test (loamrouter's demo) use
// vitesslaunch itself.
package vitesstest
