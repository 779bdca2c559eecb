package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/internal/serverproc"
)

// TestRealStart: a server starts with the requested options, writes a GTID binary log, and
// is stopped and removed when its test ends.
func TestRealStart(t *testing.T) {
	var s *Server
	t.Run("inner", func(t *testing.T) {
		s = Start(t, WithFlag("--max-connections=77"))
		require.Equal(t, "77", s.QueryString(t, "SELECT @@max_connections"))
		require.Equal(t, "1", s.QueryString(t, "SELECT @@log_bin"))
		require.Equal(t, "ROW", s.QueryString(t, "SELECT @@binlog_format"))
		require.Equal(t, "utf8mb4", s.QueryString(t, "SELECT @@character_set_server"))
		require.Equal(t, "0", s.QueryString(t, "SELECT @@read_only"))
		s.CreateDatabase(t, "we`ird db")
		s.Exec(t, "we`ird db", "CREATE TABLE t (id bigint); INSERT INTO t VALUES (1), (2)")
		require.Equal(t, "2", s.QueryString(t, "SELECT COUNT(*) FROM `we``ird db`.t"))
		require.Regexp(t, `^0-\d+-\d+$`, s.QueryString(t, "SELECT @@gtid_binlog_pos"), "writes are GTIDs in the binary log")
		require.DirExists(t, s.DataDir)
	})
	if s == nil {
		return // skipped
	}
	require.NoDirExists(t, s.DataDir, "data directory left after the test")
	require.ErrorIs(t, syscall.Kill(s.proc.Pid(), 0), syscall.ESRCH, "mariadbd still running")
}

// TestRealTwoServers: two servers at once are independent.
func TestRealTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Port, b.Port)
	require.NotEqual(t, a.ServerID, b.ServerID)
	a.CreateDatabase(t, "only_on_a")
	b.CreateDatabase(t, "only_on_b")
	q := "SELECT GROUP_CONCAT(SCHEMA_NAME) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'only_on_%'"
	require.Equal(t, "only_on_a", a.QueryString(t, q))
	require.Equal(t, "only_on_b", b.QueryString(t, q))
	b.Stop(t)
	require.Equal(t, "1", a.QueryString(t, "SELECT 1"), "stopping one must not touch the other")
}

// TestRealPortClash: a server whose port another server took in the meantime does not
// mistake that server for itself; it starts again on another port.
func TestRealPortClash(t *testing.T) {
	a := Start(t)
	taken := true
	pickPort = func() (int, error) {
		if taken {
			taken = false
			return a.Port, nil
		}
		return serverproc.FreePort()
	}
	t.Cleanup(func() { pickPort = serverproc.FreePort })
	b := Start(t)
	require.False(t, taken, "the clash was staged")
	require.NotEqual(t, a.Port, b.Port)
	require.Equal(t, b.DataDir, strings.TrimSuffix(b.QueryString(t, "SELECT @@datadir"), "/"))
	a.Stop(t)
	require.Equal(t, "1", b.QueryString(t, "SELECT 1"), "b is its own server")
}

// TestRealReplicaReplicates: a row written on the primary appears on the replica, which is
// read-only for ordinary users and reports its source.
func TestRealReplicaReplicates(t *testing.T) {
	p := Start(t)
	p.Exec(t, "", "CREATE DATABASE app; CREATE TABLE app.kv (k varchar(10) PRIMARY KEY, v text); "+
		"CREATE USER writer@'%' IDENTIFIED BY 'pw'; GRANT ALL ON app.* TO writer@'%'")
	r := p.StartReplica(t)
	require.Same(t, p, r.Primary())
	require.Nil(t, p.Primary())
	p.Exec(t, "app", "INSERT INTO kv VALUES ('hello', 'world')")
	r.WaitCaughtUp(t, 30*time.Second)
	require.Equal(t, "world", r.QueryString(t, "SELECT v FROM app.kv WHERE k = 'hello'"))
	st := r.ReplicaStatus(t)
	require.Equal(t, "Yes", st["Slave_IO_Running"])
	require.Equal(t, "Yes", st["Slave_SQL_Running"])
	require.Equal(t, "Slave_Pos", st["Using_Gtid"])
	require.Empty(t, p.ReplicaStatus(t), "a primary replicates from none")

	db, err := sql.Open("mysql", r.DSN("writer", "pw", "app"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec("INSERT INTO kv VALUES ('no', 'write')")
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me)
	require.EqualValues(t, 1290, me.Number, "read_only refuses an ordinary user's write: %v", err)
}

// TestRealReplicationDelay: a delayed replica applies a write only after the delay.
func TestRealReplicationDelay(t *testing.T) {
	p := Start(t)
	p.Exec(t, "", "CREATE DATABASE app; CREATE TABLE app.t (x int)")
	r := p.StartReplica(t, WithReplicationDelay(1500*time.Millisecond))
	require.Equal(t, "2", r.ReplicaStatus(t)["SQL_Delay"], "1.5s rounds up to whole seconds")
	r.WaitCaughtUp(t, 30*time.Second)
	p.Exec(t, "app", "INSERT INTO t VALUES (1)")
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, "0", r.QueryString(t, "SELECT COUNT(*) FROM app.t"), "not applied before the delay")
	r.WaitCaughtUp(t, 30*time.Second)
	require.Equal(t, "1", r.QueryString(t, "SELECT COUNT(*) FROM app.t"))
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
// mariadb", and fails instead under LOAM_REQUIRE_REAL=1.
func TestMissingBinariesSkipOrFail(t *testing.T) {
	t.Setenv(EnvBinDir, t.TempDir())
	t.Setenv(EnvRequireReal, "")
	r := runRecording(t, func(tb testing.TB) { Start(tb) })
	require.True(t, strings.HasPrefix(r.skipped, "skipped: needs mariadb ("), r.skipped)
	require.Contains(t, r.skipped, "mariadbd")
	require.Empty(t, r.failed)

	t.Setenv(EnvRequireReal, "1")
	r = runRecording(t, func(tb testing.TB) { NewShared().Get(tb) })
	require.Empty(t, r.skipped)
	require.Contains(t, r.failed, "failing instead because")
}

// TestFindBinaries: LOAM_MARIADB_BIN must hold both programs, executable.
func TestFindBinaries(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvBinDir, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mariadbd"), nil, 0o755))
	_, err := FindBinaries()
	require.True(t, errors.Is(err, ErrNoBinaries), "%v", err)
	require.ErrorContains(t, err, "mariadb-install-db")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mariadb-install-db"), nil, 0o644))
	_, err = FindBinaries()
	require.ErrorContains(t, err, "not an executable")
	require.NoError(t, os.Chmod(filepath.Join(dir, "mariadb-install-db"), 0o755))
	b, err := FindBinaries()
	require.NoError(t, err)
	require.Equal(t, Binaries{Server: filepath.Join(dir, "mariadbd"), Install: filepath.Join(dir, "mariadb-install-db")}, b)
}

// TestRealShared: one server for many tests, started once, removed by Close.
func TestRealShared(t *testing.T) {
	sh := NewShared(WithFlag("--max-connections=20"))
	a := sh.Get(t)
	require.Same(t, a, sh.Get(t))
	require.Equal(t, "20", a.QueryString(t, "SELECT @@max_connections"))
	require.NoError(t, sh.Close())
	require.NoDirExists(t, a.DataDir)
	require.ErrorIs(t, syscall.Kill(a.proc.Pid(), 0), syscall.ESRCH)
	require.NoError(t, NewShared().Close(), "closing an unstarted Shared")
}

// TestRealBadFlagQuotesLog: a server that cannot start fails with its log.
func TestRealBadFlagQuotesLog(t *testing.T) {
	Start(t).Stop(t) // skips here without binaries
	s, err := start(nil, []Option{WithFlag("--no-such-option=1")})
	require.Nil(t, s)
	require.Error(t, err)
	require.Contains(t, err.Error(), "no-such-option")
	require.Contains(t, err.Error(), "exited while starting")
}

// TestRealDSN: the DSN logs in as the user given, with the password given. (A user name with
// ':' cannot be written in a go-sql-driver DSN at all: the first ':' ends the user.)
func TestRealDSN(t *testing.T) {
	s := Start(t)
	s.Exec(t, "", "CREATE DATABASE d; CREATE USER 'u@x'@'%' IDENTIFIED BY 'p@ss:/w'; GRANT SELECT ON d.* TO 'u@x'@'%'")
	db, err := sql.Open("mysql", s.DSN("u@x", "p@ss:/w", "d"))
	require.NoError(t, err)
	defer db.Close()
	var user, dbName string
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT CURRENT_USER(), DATABASE()").Scan(&user, &dbName))
	require.Equal(t, "u@x@%", user)
	require.Equal(t, "d", dbName)
}
