package pglaunch

import (
	"context"
	"fmt"
	"strconv"
)

// StartStandby starts a streaming-replication standby of s, made with pg_basebackup -R (so
// it follows s through primary_conninfo and a standby.signal file). It accepts read-only
// connections (hot standby) once it is consistent; opts add settings of its own, such as
// WithSetting("recovery_min_apply_delay", "500ms"). ctx bounds the wait for it to accept
// connections; it is stopped and removed like any server, by the caller.
func (s *Server) StartStandby(ctx context.Context, opts ...Option) (*Server, error) {
	sb, err := newServer(s.bin, s.owner)
	if err != nil {
		return nil, err
	}
	sb.Standby, sb.primary = true, s
	err = s.owner.run(s.bin, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-U", "postgres", "-D", sb.DataDir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	if err != nil {
		sb.Close()
		return nil, fmt.Errorf("pglaunch: making a standby of the server on port %d: %w", s.Port, err)
	}
	if err := sb.configureAndStart(ctx, opts); err != nil {
		sb.Close()
		return nil, err
	}
	return sb, nil
}

// Primary is the server a standby was made from, nil for a primary.
func (s *Server) Primary() *Server { return s.primary }
