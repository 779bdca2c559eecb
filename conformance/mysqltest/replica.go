package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// StartReplica starts a new server replicating from s over GTIDs (MASTER_USE_GTID =
// slave_pos, as root) from the start of s's binary log, read_only as Vitess runs its
// replicas, and registers its shutdown and removal with t.Cleanup. WithReplicationDelay
// delays it.
func (s *Server) StartReplica(t testing.TB, opts ...Option) *Server {
	t.Helper()
	r, err := start(s, append([]Option{WithFlag("--read-only=ON")}, opts...))
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	delay := int64((c.delay + time.Second - 1) / time.Second)
	r.Exec(t, "", fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %d, MASTER_USER = 'root', "+
		"MASTER_PASSWORD = '', MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1, MASTER_DELAY = %d; START SLAVE", s.Port, delay))
	return r
}

// Primary is the server a replica replicates from; nil for a primary.
func (s *Server) Primary() *Server { return s.primary }

// WaitCaughtUp waits until a replica has applied everything its primary has written to its
// binary log (its gtid_slave_pos equals the primary's gtid_binlog_pos, which holds for the
// one-domain servers of this package), failing the test after timeout with the replica's
// replication status.
func (s *Server) WaitCaughtUp(t testing.TB, timeout time.Duration) {
	t.Helper()
	if s.primary == nil {
		t.Fatalf("mysqltest: server on port %d is not a replica", s.Port)
	}
	want := s.primary.QueryString(t, "SELECT @@GLOBAL.gtid_binlog_pos")
	deadline := time.Now().Add(timeout)
	for {
		got := s.QueryString(t, "SELECT @@GLOBAL.gtid_slave_pos")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			st := s.ReplicaStatus(t)
			t.Fatalf("mysqltest: replica on port %d at %q, primary at %q after %v; IO %s %q, SQL %s %q", s.Port, got, want, timeout,
				st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ReplicaStatus returns SHOW SLAVE STATUS by column name; empty on a server that replicates
// from none.
func (s *Server) ReplicaStatus(t testing.TB) map[string]string {
	t.Helper()
	db := s.connect(t, "", false)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatalf("mysqltest: port %d: SHOW SLAVE STATUS: %v", s.Port, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("mysqltest: port %d: SHOW SLAVE STATUS: %v", s.Port, err)
	}
	out := map[string]string{}
	if !rows.Next() {
		return out
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatalf("mysqltest: port %d: SHOW SLAVE STATUS: %v", s.Port, err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}
