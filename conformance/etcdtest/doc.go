// Package etcdtest runs throwaway etcd clusters for tests: one or three members of the
// etcd binary Debian ships (etcd-server, 3.4), on 127.0.0.1 ports found free, each in a temp
// directory of its own, started and stopped through internal/serverproc like
// pgtest's servers.
//
// Fault tests need to hurt one member at a time, so a Member can be killed (SIGKILL),
// paused (SIGSTOP) and resumed (SIGCONT), stopped and started again on its data, and a
// Cluster names its current raft leader.
//
// Without the binary a test skips with "skipped: needs etcd"; with LOAM_REQUIRE_REAL=1 (set
// by CI) it fails instead, so a missing server cannot pass as a green run. $LOAM_ETCD names
// another binary.
package etcdtest
