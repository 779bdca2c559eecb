package pgtest

import (
	"context"
	"testing"
	"time"
)

// StartStandby starts a streaming-replication standby of s, made with pg_basebackup -R (so
// it follows s through primary_conninfo and a standby.signal file). It accepts read-only
// connections (hot standby) once it is consistent; opts add settings of its own, such as
// WithSetting("recovery_min_apply_delay", "500ms"). It is stopped and removed like any
// server.
func (s *Server) StartStandby(t testing.TB, opts ...Option) *Server {
	t.Helper()
	launched, err := s.Server.StartStandby(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	sb := &Server{Server: launched, primary: s}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return sb
}

// Primary is the server a standby was made from, nil for a primary.
func (s *Server) Primary() *Server { return s.primary }

// WaitCaughtUp waits until a standby has replayed everything its primary had written when
// the call began, or fails the test after timeout. The target is the primary's WAL insert
// position, not its write position: with synchronous_commit off (as these servers run) a
// commit can be inserted but not yet written when the call begins.
func (s *Server) WaitCaughtUp(t testing.TB, timeout time.Duration) {
	t.Helper()
	if s.primary == nil {
		t.Fatalf("pgtest: WaitCaughtUp on the server on port %d, which is not a standby", s.Port)
	}
	target := s.primary.QueryString(t, "postgres", "SELECT pg_current_wal_insert_lsn()::text")
	conn := s.connect(t, "postgres")
	defer conn.Close(context.Background())
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var done bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target).Scan(&done)
		cancel()
		if err != nil {
			t.Fatalf("pgtest: reading the replay position of the standby on port %d: %v", s.Port, err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: the standby on port %d had not replayed up to %s after %v", s.Port, target, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Promote turns a standby into a primary (pg_promote, waiting for it to finish).
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	conn := s.connect(t, "postgres")
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil || !ok {
		t.Fatalf("pgtest: promoting the standby on port %d: ok=%v err=%v", s.Port, ok, err)
	}
	s.Standby = false
}
