package pgtest

import (
	"context"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/pglaunch"
)

// TestRealStart: a server starts with the requested settings, speaks UTF8, and is stopped and
// removed when its test ends.
func TestRealStart(t *testing.T) {
	var s *Server
	t.Run("inner", func(t *testing.T) {
		s = Start(t, WithSetting("max_prepared_transactions", "7"), WithSetting("application_name", "it's quoted"))
		require.Equal(t, "7", s.QueryString(t, "postgres", "SHOW max_prepared_transactions"))
		require.Equal(t, "it's quoted", s.QueryString(t, "postgres", "SHOW application_name"))
		require.Equal(t, "UTF8", s.QueryString(t, "postgres", "SHOW server_encoding"))
		require.Equal(t, "off", s.QueryString(t, "postgres", "SHOW fsync"))
		require.Equal(t, "false", s.QueryString(t, "postgres", "SELECT pg_is_in_recovery()::text"))
		s.CreateDatabase(t, "Mixed Case")
		require.Equal(t, "Mixed Case", s.QueryString(t, "Mixed Case", "SELECT current_database()"))
		require.DirExists(t, s.DataDir)
	})
	if s == nil {
		return // skipped
	}
	require.NoDirExists(t, s.DataDir, "data directory left after the test")
	require.ErrorIs(t, syscall.Kill(s.Pid(), 0), syscall.ESRCH, "postmaster still running")
}

// TestRealTwoServers: two servers at once are independent.
func TestRealTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Port, b.Port)
	a.Exec(t, "postgres", "CREATE TABLE only_on_a (x int)")
	b.Exec(t, "postgres", "CREATE TABLE only_on_b (x int)")
	require.Equal(t, "only_on_a", a.QueryString(t, "postgres", "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'only_on_%'"))
	require.Equal(t, "only_on_b", b.QueryString(t, "postgres", "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'only_on_%'"))
	require.NoError(t, b.Stop())
	require.Equal(t, "1", a.QueryString(t, "postgres", "SELECT 1::text"), "stopping one must not touch the other")
}

// TestRealStandbyReplicates: a row written on the primary appears on the standby, which
// refuses writes until promoted.
func TestRealStandbyReplicates(t *testing.T) {
	p := Start(t)
	p.CreateDatabase(t, "app")
	p.Exec(t, "app", "CREATE TABLE kv (k text PRIMARY KEY, v text)")
	sb := p.StartStandby(t, WithSetting("hot_standby_feedback", "on"))
	require.True(t, sb.Standby)
	require.Same(t, p, sb.Primary())
	require.Equal(t, "true", sb.QueryString(t, "app", "SELECT pg_is_in_recovery()::text"))
	require.Equal(t, "on", sb.QueryString(t, "app", "SHOW hot_standby_feedback"))

	p.Exec(t, "app", "INSERT INTO kv VALUES ('hello', 'world')")
	sb.WaitCaughtUp(t, 30*time.Second)
	require.Equal(t, "world", sb.QueryString(t, "app", "SELECT v FROM kv WHERE k = 'hello'"))
	require.Equal(t, "streaming", p.QueryString(t, "postgres", "SELECT state FROM pg_stat_replication"))

	conn := sb.Connect(t, "app")
	_, err := conn.Exec(context.Background(), "INSERT INTO kv VALUES ('no', 'write')")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "25006", pgErr.Code, "read_only_sql_transaction")

	sb.Promote(t)
	sb.Exec(t, "app", "INSERT INTO kv VALUES ('after', 'promotion')")
	require.Equal(t, "false", sb.QueryString(t, "app", "SELECT pg_is_in_recovery()::text"))
}

// recordingTB catches Skip and Fatal so that the skip-or-fail rule can be tested.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skip(args ...any) {
	r.skipped = args[0].(string)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failed = format
	runtime.Goexit()
}

func runRecording(t *testing.T, f func(testing.TB)) *recordingTB {
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

// TestMissingBinariesSkipOrFail: without binaries a test skips with "skipped: needs
// postgres", and fails instead under LOAM_REQUIRE_REAL=1.
func TestMissingBinariesSkipOrFail(t *testing.T) {
	t.Setenv(pglaunch.EnvBinDir, t.TempDir())
	t.Setenv(EnvRequireReal, "")
	r := runRecording(t, func(tb testing.TB) { Start(tb) })
	require.True(t, strings.HasPrefix(r.skipped, "skipped: needs postgres ("), r.skipped)
	require.Contains(t, r.skipped, "initdb")
	require.Empty(t, r.failed)

	t.Setenv(EnvRequireReal, "1")
	r = runRecording(t, func(tb testing.TB) { Start(tb) })
	require.Empty(t, r.skipped)
	require.Contains(t, r.failed, "failing instead because")
}

// TestRealShared: one server for many tests, started once, removed by Close.
func TestRealShared(t *testing.T) {
	sh := NewShared(WithSetting("max_connections", "20"))
	a := sh.Get(t)
	require.Same(t, a, sh.Get(t))
	require.Equal(t, "20", a.QueryString(t, "postgres", "SHOW max_connections"))
	require.NoError(t, sh.Close())
	require.NoDirExists(t, a.DataDir)
	require.ErrorIs(t, syscall.Kill(a.Pid(), 0), syscall.ESRCH)
	require.NoError(t, NewShared().Close(), "closing an unstarted Shared")
}
