// Package vitesslaunch starts a throwaway Vitess: an etcd topology server, vtctld, one
// vttablet per shard on its own MariaDB (the shard's primary), and vtgate, every one on a
// free port of 127.0.0.1 under a private temporary directory, for programs that need a real
// Vitess for a while and then none (`loamrouter demo --vitess`; the tests, through
// conformance/vitesstest, which wraps this package with testing.TB and skips).
//
// The Vitess programs are vitess.io/vitess v0.24.4's, built with `go build` by
// conformance/vitesstest/vitessbin/build.sh (a module of its own: `go install` refuses
// Vitess's exclude directive) into a directory named by LOAM_VITESS_BIN (EnvBinDir). etcd is
// Debian's etcd-server (3.4), reached with --topo-implementation etcd2; MariaDB is Debian's
// mariadb-server, run by mysqlctl. Without them Open fails wrapping ErrNoBinaries, so a
// caller can tell the user what to install.
//
// What this cluster can and cannot do on stock Vitess v0.24.4 and MariaDB 10.11 (measured):
//
//   - One PRIMARY per shard, elected with PlannedReparentShard, with the keyspace's
//     durability policy "none". A replica cannot join a shard that has a primary (its
//     vttablet exits on MariaDB's missing server UUID: invalid MySQL 5.6 SID ""), so there
//     are no replicas, and nothing that needs one (a reparent to another tablet, semi-sync)
//     can run here.
//   - mysqlctl's MariaDB my.cnf loads semisync_master.so and semisync_slave.so, which
//     Debian does not ship (MariaDB has semi-sync built in), and its init_db.sql reads
//     @@global.super_read_only, which MariaDB lacks. Both are derived at run time from
//     Vitess's own files in the module cache (`go mod download`, so the go command must be
//     on PATH), without those lines (template.go), and given with
//     --mysqlctl-mycnf-template and --init-db-sql-file.
//   - Vitess's servers refuse to run as root; as root the cluster runs every program as
//     nobody:nogroup and hands its directory to that user.
//   - Everything is tuned to be thrown away: etcd without fsync, MariaDB fast rather than
//     crash-safe, loopback only, vtgate with one user and a random password.
//
// Stopping is the caller's: Close stops every program and removes the files.
package vitesslaunch
