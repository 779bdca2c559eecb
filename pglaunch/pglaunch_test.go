package pglaunch_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/pglaunch"
)

// TestMain removes this process's template data directory when the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	pglaunch.RemoveTemplate()
	os.Exit(code)
}

// needPostgres skips the test (fails it under LOAM_REQUIRE_REAL=1) where this machine
// cannot run a server, the way every test meeting a real Postgres does.
func needPostgres(t *testing.T) {
	t.Helper()
	require.NoError(t, pgtest.Start(t).Stop())
}

// show reads a setting over a connection of its own.
func show(t *testing.T, s *pglaunch.Server, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SHOW "+pgx.Identifier{name}.Sanitize()).Scan(&v))
	return v
}

// TestRealBadSettingQuotesLog: a server that cannot start fails with its log.
func TestRealBadSettingQuotesLog(t *testing.T) {
	needPostgres(t)
	s, err := pglaunch.Start(t.Context(), pglaunch.WithSetting("no_such_setting", "1"))
	require.Nil(t, s)
	require.Error(t, err)
	require.Contains(t, err.Error(), `unrecognized configuration parameter "no_such_setting"`)
	require.Contains(t, err.Error(), "exited while starting")
}

// TestRealStartStopClose: a program's server (no testing.TB) runs until Stop, which keeps
// its files, and Close removes them; a standby follows its primary; a cancelled context or
// a machine without PostgreSQL is an error to return, not a skip.
func TestRealStartStopClose(t *testing.T) {
	needPostgres(t)
	s, err := pglaunch.Start(t.Context(), pglaunch.WithSetting("max_connections", "30"))
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "30", show(t, s, "max_connections"))
	require.Equal(t, "off", show(t, s, "fsync"), "tuned to be thrown away")

	sb, err := s.StartStandby(t.Context(), pglaunch.WithSetting("hot_standby_feedback", "on"))
	require.NoError(t, err)
	require.True(t, sb.Standby)
	require.Same(t, s, sb.Primary())
	require.Equal(t, "on", show(t, sb, "hot_standby_feedback"))
	require.NoError(t, sb.Close())
	require.NoDirExists(t, sb.DataDir)
	require.ErrorIs(t, syscall.Kill(sb.Pid(), 0), syscall.ESRCH, "the standby's postmaster still running after Close")

	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "stopping twice is harmless")
	require.ErrorIs(t, syscall.Kill(s.Pid(), 0), syscall.ESRCH, "postmaster still running after Stop")
	require.FileExists(t, filepath.Join(s.DataDir, "PG_VERSION"), "Stop keeps the files")
	require.NoError(t, s.Close())
	require.NoDirExists(t, s.DataDir)

	// A temp dir of its own (searchable by the postgres user), to see what a failed start
	// leaves in it.
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(tmp, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s, err = pglaunch.Start(ctx)
	require.Nil(t, s)
	require.ErrorIs(t, err, context.Canceled)
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left, "a failed start leaves no directory behind")

	t.Setenv(pglaunch.EnvBinDir, t.TempDir())
	_, err = pglaunch.Start(t.Context())
	require.ErrorIs(t, err, pglaunch.ErrNoBinaries)
}
