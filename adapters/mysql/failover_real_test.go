package mysql_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/mysqltest"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/failover"
)

// TestRealFailoverFencesOldPrimary: the failover driver's FenceOld, executed with this
// package's Backend as the old primary's ShardBackend, fences the application user on a real
// server: its open session ends and a new login is refused. Once the old primary is down,
// the same command answers with an error that says the server could not be reached, which
// the failover machine expects.
func TestRealFailoverFencesOldPrimary(t *testing.T) {
	old := mysqltest.Start(t)
	ctx := t.Context()
	u := newEnvDB(t, old)
	b := openBackend(t, old, old.RootDSN(u.db), "")
	sb := shardmap.Backend{Host: "127.0.0.1", Port: uint16(old.Port), Database: u.db, Tablet: "zone1-0000000100"}
	exec := &driver.FailoverExecutor{
		Backend: func(key string) (adapters.ShardBackend, bool) { return b, key == driver.BackendKey(sb) },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	sess, err := login(ctx, old, u.db, u.app)
	require.NoError(t, err)
	defer sess.Close()

	cmd := failover.FenceOld{Step: "fence", Attempt: 1, Shard: "-80", Backend: sb, Role: u.app}
	in, ok := exec.Execute(ctx, cmd)
	require.True(t, ok)
	require.Equal(t, failover.Reply{Step: "fence", Attempt: 1}, in)
	require.ErrorIs(t, sess.Insert(ctx, conformance.BackendRow{ID: 1}), adapters.ErrFenced)
	require.True(t, mysqlad.IsFenceError(canLogin(old, u.db, u.app)))

	old.Stop(t)
	cmd.Attempt = 2
	in, ok = exec.Execute(context.Background(), cmd)
	require.True(t, ok)
	reply := in.(failover.Reply)
	require.Equal(t, 2, reply.Attempt)
	require.ErrorIs(t, reply.Err, adapters.ErrUnreachable, "%v", reply.Err)
}
