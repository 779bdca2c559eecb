package mysql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/mysqltest"
)

// TestRealBackend runs the ShardBackend contract on a real MariaDB primary and replica, then
// shows each case catching a backend with one deliberate bug. One primary (the package's
// shared server) and one replica serve every subtest.
func TestRealBackend(t *testing.T) {
	s := my.Get(t)
	r := s.StartReplica(t)
	r.WaitCaughtUp(t, 30*time.Second)

	t.Run("suite", func(t *testing.T) {
		conformance.RunBackendSuite(t, harness(s, r, ""))
	})

	t.Run("mutants", func(t *testing.T) {
		mustCatch := map[string][]string{
			"fence-skips-kill":      {"FenceEndsOpenSessions"},
			"fence-skips-lock":      {"FenceRefusesNewLogin", "FenceIsIdempotent"},
			"fence-kills-all":       {"FenceSparesOtherRoles"},
			"unfence-noop":          {"FenceIsIdempotent", "UnfenceRestores"},
			"status-says-standby":   {"StatusPrimary"},
			"status-slave-pos":      {"StatusPrimary"},
			"checksum-ordered":      {"ChecksumEqualForEqualData"},
			"checksum-xor":          {"ChecksumDiffersForChangedRow"},
			"checksum-wrong-vindex": {"ChecksumSelectsShardRows"},
		}
		// Mutations the contract does not reach; this package's own tests catch them.
		caughtElsewhere := map[string]string{
			"fence-one-host":         "TestRealFence/every_host_entry",
			"fence-binlogged":        "TestRealFence/no_errant_GTID",
			"unfence-unlocks-all":    "TestRealFence/accounts_locked_before_stay_locked",
			"prepared-joins-data":    "TestRealPrepared",
			"checksum-null-is-empty": "TestRealChecksum/NULL_is_not_empty",
			"no-settle":              "TestRealFenceCutShortSettles",
		}
		require.Len(t, mustCatch, len(mysqlad.Mutations)-len(caughtElsewhere), "every mutation has cases that must catch it")
		cases := conformance.BackendCases()
		for _, mutant := range slices.Sorted(maps.Keys(mustCatch)) {
			t.Run(mutant, func(t *testing.T) {
				h := harness(s, nil, mutant)
				for _, name := range mustCatch[mutant] {
					i := slices.IndexFunc(cases, func(c conformance.BackendCase) bool { return c.Name == name })
					require.GreaterOrEqual(t, i, 0, "no case %s", name)
					out := conformance.Record(t.Context(), name, func(tb conformance.TB) { cases[i].Run(tb, h) })
					require.True(t, out.Failed, "mutant %s was not caught by %s", mutant, name)
					t.Logf("%s caught by %s: %s", mutant, name, firstLine(out.Msgs))
				}
			})
		}
	})
}

func firstLine(msgs []string) string {
	if len(msgs) == 0 {
		return "(no message)"
	}
	m := strings.TrimSpace(msgs[0])
	if i := strings.Index(m, "Error:"); i >= 0 {
		m = strings.TrimSpace(m[i+len("Error:"):])
	}
	if i := strings.IndexByte(m, '\n'); i >= 0 {
		m = m[:i]
	}
	return m
}

// TestRealStatusLag: a replica that applies late reports the age of what it applies, and no
// lag once it has applied everything it received; a replica whose replication stopped
// reports LagUnknown.
func TestRealStatusLag(t *testing.T) {
	s := my.Get(t)
	ctx := t.Context()
	delayed := s.StartReplica(t, mysqltest.WithReplicationDelay(2*time.Second))
	b := openBackend(t, delayed, delayed.RootDSN(""), "")
	delayed.WaitCaughtUp(t, 30*time.Second)
	adminExec(t, s, "", "CREATE DATABASE IF NOT EXISTS lag_probe", "CREATE TABLE IF NOT EXISTS lag_probe.t (x int)", "INSERT INTO lag_probe.t VALUES (1)")
	var seen adapters.BackendStatus
	var err error
	require.Eventually(t, func() bool {
		seen, err = b.Status(ctx)
		require.NoError(t, err)
		return seen.Lag >= time.Second && seen.Lag != mysqlad.LagUnknown
	}, 10*time.Second, 20*time.Millisecond, "a replica 2s behind must report lag")
	require.Equal(t, adapters.RoleStandby, seen.Role)
	require.True(t, seen.ReadOnly)
	c, err := mysqlad.ComparePositions(seen.Position, seen.Replayed)
	require.NoError(t, err)
	require.Equal(t, 1, c, "received %s but not yet applied %s", seen.Position, seen.Replayed)
	require.Eventually(t, func() bool {
		seen, err = b.Status(ctx)
		require.NoError(t, err)
		return seen.Lag == 0 && seen.Position == seen.Replayed
	}, 15*time.Second, 20*time.Millisecond, "once everything received is applied there is no lag")
	primary := openBackend(t, s, s.RootDSN(""), "")
	pst, err := primary.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, pst.Position, seen.Position, "caught up: the replica has what the primary wrote")

	adminExec(t, delayed, "", "STOP SLAVE SQL_THREAD")
	seen, err = b.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, adapters.RoleStandby, seen.Role, "a replica with replication stopped is still a replica")
	require.Equal(t, mysqlad.LagUnknown, seen.Lag, "stopped replication: lag unknown, not 0")
	adminExec(t, delayed, "", "STOP SLAVE", "RESET SLAVE ALL")
	seen, err = b.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, adapters.RolePrimary, seen.Role, "no source configured: a primary (read-only still)")
	require.True(t, seen.ReadOnly)
}

// canLogin tries a fresh login as user (password appPassword) to db and returns the error.
func canLogin(s *mysqltest.Server, db, user string) error {
	c, err := connector(s, db, user).Connect(context.Background())
	if err == nil {
		c.Close()
	}
	return err
}

// locked reads whether user@host is locked, as root.
func locked(t *testing.T, s *mysqltest.Server, user, host string) bool {
	t.Helper()
	return s.QueryString(t, "SELECT COALESCE(JSON_VALUE(Priv, '$.account_locked'), 0) <> 0 FROM mysql.global_priv WHERE User = ? AND Host = ?", user, host) == "1"
}

// TestRealFence checks the fence beyond the contract: every host entry of the user, accounts
// locked before, the binary log, running statements, the administrator's own user, least
// privilege and cancellation.
func TestRealFence(t *testing.T) {
	s := my.Get(t)
	ctx := t.Context()
	fenceAndCheck := func(t *testing.T, mutant string, u envUsers) error {
		b := openBackend(t, s, s.RootDSN(u.db), mutant)
		require.NoError(t, b.FenceWrites(ctx, u.app))
		return canLogin(s, u.db, u.app)
	}

	t.Run("every host entry", func(t *testing.T) {
		// The server picks the most specific matching account: from 127.0.0.1 that is
		// app@127.0.0.1, not app@%.
		for _, mutant := range []string{"", "fence-one-host"} {
			u := newEnvDB(t, s)
			adminExec(t, s, "", fmt.Sprintf("CREATE USER %s@'127.0.0.1' IDENTIFIED BY '%s'", mysqlad.QuoteIdent(u.app), appPassword),
				fmt.Sprintf("GRANT SELECT, INSERT ON %s.items TO %s@'127.0.0.1'", mysqlad.QuoteIdent(u.db), mysqlad.QuoteIdent(u.app)))
			err := fenceAndCheck(t, mutant, u)
			if mutant == "" {
				require.True(t, mysqlad.IsFenceError(err), "a login through the 127.0.0.1 entry is refused too: %v", err)
				require.True(t, locked(t, s, u.app, "%") && locked(t, s, u.app, "127.0.0.1"))
			} else {
				require.NoError(t, err, "mutant %s: the user still logs in through its 127.0.0.1 entry", mutant)
			}
		}
	})

	t.Run("accounts locked before stay locked", func(t *testing.T) {
		for _, mutant := range []string{"", "unfence-unlocks-all"} {
			u := newEnvDB(t, s)
			adminExec(t, s, "", fmt.Sprintf("CREATE USER %s@'10.%%' IDENTIFIED BY 'x' ACCOUNT LOCK", mysqlad.QuoteIdent(u.app)))
			b := openBackend(t, s, s.RootDSN(u.db), mutant)
			require.NoError(t, b.FenceWrites(ctx, u.app))
			fenced, err := b.FencedAccounts(ctx, u.app)
			require.NoError(t, err)
			require.Equal(t, []string{u.app + "@%"}, fenced, "the fence records what it locked, not what was locked already")
			require.NoError(t, b.UnfenceWrites(ctx, u.app))
			require.NoError(t, canLogin(s, u.db, u.app))
			if mutant == "" {
				fenced, err = b.FencedAccounts(ctx, u.app)
				require.NoError(t, err)
				require.Empty(t, fenced, "unfence forgets what it unlocked")
				require.True(t, locked(t, s, u.app, "10.%"), "an account locked before the fence stays locked")
			} else {
				require.False(t, locked(t, s, u.app, "10.%"), "mutant %s unlocks what it did not lock", mutant)
			}
		}
	})

	t.Run("no errant GTID", func(t *testing.T) {
		for _, mutant := range []string{"", "fence-binlogged"} {
			u := newEnvDB(t, s)
			b := openBackend(t, s, s.RootDSN(u.db), mutant)
			before := s.QueryString(t, "SELECT @@gtid_binlog_pos")
			require.NoError(t, b.FenceWrites(ctx, u.app))
			require.NoError(t, b.UnfenceWrites(ctx, u.app))
			after := s.QueryString(t, "SELECT @@gtid_binlog_pos")
			if mutant == "" {
				require.Equal(t, before, after, "fencing and unfencing write nothing a replica (or a new primary) would lack")
			} else {
				require.NotEqual(t, before, after, "mutant %s: the fence is in the binary log", mutant)
			}
		}
		u := newEnvDB(t, s)
		b, err := mysqlad.Open(ctx, s.RootDSN(u.db), mysqlad.Options{Binlog: true})
		require.NoError(t, err)
		defer b.Close()
		before := s.QueryString(t, "SELECT @@gtid_binlog_pos")
		require.NoError(t, b.FenceWrites(ctx, u.app))
		require.NotEqual(t, before, s.QueryString(t, "SELECT @@gtid_binlog_pos"), "Options.Binlog replicates the fence")
	})

	t.Run("running statements and transactions end", func(t *testing.T) {
		u := newEnvDB(t, s)
		b := openBackend(t, s, s.RootDSN(u.db), "")
		busy, err := login(ctx, s, u.db, u.app)
		require.NoError(t, err)
		defer busy.Close()
		sleeping := make(chan error, 1)
		go func() {
			_, err := busy.(*appSession).conn.ExecContext(ctx, "SELECT SLEEP(30)")
			sleeping <- busy.(*appSession).classify(ctx, "Sleep", err)
		}()
		require.Eventually(t, func() bool {
			return s.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND = 'Query'", u.app) == "1"
		}, 5*time.Second, 5*time.Millisecond)
		t0 := time.Now()
		require.NoError(t, b.FenceWrites(ctx, u.app))
		select {
		case err := <-sleeping:
			require.ErrorIs(t, err, adapters.ErrFenced, "%v", err)
			require.Less(t, time.Since(t0), 10*time.Second, "a running statement ends at once")
		case <-time.After(10 * time.Second):
			t.Fatal("SLEEP(30) kept running through the fence")
		}
		require.Equal(t, "0", s.QueryString(t, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", u.app))
	})

	t.Run("logins racing the fence", func(t *testing.T) {
		// Writers log in and insert over and over while the fence runs, and go on trying after
		// it, as a router's pool reconnects to a fenced server. FenceWrites must return (the
		// refused logins that keep appearing under the user's name are no sessions to wait
		// for); once it has, no session of the user may be left, and no row may have been
		// written by a statement that started after it returned.
		u := newEnvDB(t, s)
		adminExec(t, s, "", "ALTER TABLE "+mysqlad.QuoteIdent(u.db)+".items ADD COLUMN at datetime(6) NOT NULL DEFAULT NOW(6)")
		b := openBackend(t, s, s.RootDSN(u.db), "")
		const racers = 8
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var wrote atomic.Int64
		for w := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := connector(s, u.db, u.app)
				for i := int64(0); ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					db := sql.OpenDB(c)
					if _, err := db.ExecContext(ctx, "INSERT INTO items (id, v) VALUES (?, 'racer')", int64(w)<<32|i); err == nil {
						wrote.Add(1)
					}
					db.Close()
				}
			}()
		}
		require.Eventually(t, func() bool { return wrote.Load() > 50 }, 10*time.Second, time.Millisecond, "the writers are writing")
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		t0 := time.Now()
		require.NoError(t, b.FenceWrites(fctx, u.app), "the fence must end under a reconnect storm")
		took := time.Since(t0)
		returned := s.QueryString(t, "SELECT NOW(6)")
		require.Equal(t, "", s.QueryString(t, "SELECT GROUP_CONCAT(CONCAT_WS('/', ID, COMMAND, STATE)) FROM information_schema.PROCESSLIST WHERE USER = ? AND COMMAND <> 'Connect' AND COALESCE(STATE, '') <> 'login'", u.app),
			"no session of the fenced user is left when FenceWrites returns (refused logins aside)")
		time.Sleep(200 * time.Millisecond)
		close(stop)
		wg.Wait()
		require.Equal(t, "0", s.QueryString(t, "SELECT COUNT(*) FROM "+mysqlad.QuoteIdent(u.db)+".items WHERE at >= ?", returned),
			"a write that started after the fence returned was applied")
		t.Logf("%d writes before the fence, none after; the fence took %v under %d reconnecting writers", wrote.Load(), took, racers)
	})

	t.Run("refuses to fence its own user", func(t *testing.T) {
		u := newEnvDB(t, s)
		adminExec(t, s, "", fmt.Sprintf("GRANT ALL ON *.* TO %s@'%%'", mysqlad.QuoteIdent(u.other)))
		b := openBackend(t, s, s.DSN(u.other, appPassword, u.db), "")
		err := b.FenceWrites(ctx, u.other)
		require.ErrorContains(t, err, "kill its own connections")
		require.NoError(t, canLogin(s, u.db, u.other), "a refused fence changes nothing")
	})

	t.Run("unknown user", func(t *testing.T) {
		u := newEnvDB(t, s)
		b := openBackend(t, s, s.RootDSN(u.db), "")
		for _, f := range []func(context.Context, string) error{b.FenceWrites, b.UnfenceWrites} {
			err := f(ctx, "no_such_user_anywhere")
			var be *adapters.BackendError
			require.ErrorAs(t, err, &be)
			require.Equal(t, mysqlad.CodeCannotUser, be.Code)
			require.NotErrorIs(t, err, adapters.ErrFenced)
		}
		require.ErrorContains(t, b.FenceWrites(ctx, "a\x00b"), "NUL")
	})

	t.Run("least privilege", func(t *testing.T) {
		u := newEnvDB(t, s)
		ctl := "ctl_" + u.app
		q := mysqlad.QuoteIdent
		adminExec(t, s, "",
			fmt.Sprintf("CREATE USER %s@'%%' IDENTIFIED BY '%s'", q(ctl), appPassword),
			fmt.Sprintf("GRANT CREATE USER, CONNECTION ADMIN, BINLOG ADMIN ON *.* TO %s@'%%'", q(ctl)),
			fmt.Sprintf("GRANT SELECT ON mysql.global_priv TO %s@'%%'", q(ctl)),
			fmt.Sprintf("GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON loam.* TO %s@'%%'", q(ctl)))
		sess, err := login(ctx, s, u.db, u.app)
		require.NoError(t, err)
		defer sess.Close()
		b := openBackend(t, s, s.DSN(ctl, appPassword, ""), "")
		_, err = b.Status(ctx)
		require.Error(t, err, "SHOW REPLICA STATUS needs SLAVE MONITOR")
		adminExec(t, s, "", fmt.Sprintf("GRANT SLAVE MONITOR ON *.* TO %s@'%%'", q(ctl)))
		_, err = openBackend(t, s, s.DSN(ctl, appPassword, ""), "").Status(ctx) // global privileges count from the next login
		require.NoError(t, err)
		err = b.FenceWrites(ctx, u.app)
		require.ErrorContains(t, err, "PROCESS", "without PROCESS the fence would not see the sessions it must end")
		require.NoError(t, canLogin(s, u.db, u.app), "a refused fence locks nothing")
		adminExec(t, s, "", fmt.Sprintf("GRANT PROCESS ON *.* TO %s@'%%'", q(ctl)))
		require.NoError(t, b.FenceWrites(ctx, u.app))
		require.ErrorIs(t, sess.Insert(ctx, conformance.BackendRow{ID: 1}), adapters.ErrFenced)
		require.True(t, mysqlad.IsFenceError(canLogin(s, u.db, u.app)))
		require.NoError(t, b.UnfenceWrites(ctx, u.app))
		require.NoError(t, canLogin(s, u.db, u.app))
		adminExec(t, s, "", fmt.Sprintf("REVOKE BINLOG ADMIN ON *.* FROM %s@'%%'", q(ctl)))
		b2 := openBackend(t, s, s.DSN(ctl, appPassword, ""), "")
		require.ErrorContains(t, b2.FenceWrites(ctx, u.app), "sql_log_bin", "without BINLOG ADMIN the fence refuses rather than leave an errant GTID")
		require.NoError(t, canLogin(s, u.db, u.app))
	})

	t.Run("cancelled context", func(t *testing.T) {
		u := newEnvDB(t, s)
		b := openBackend(t, s, s.RootDSN(u.db), "")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, b.FenceWrites(cctx, u.app), context.Canceled)
		require.NoError(t, canLogin(s, u.db, u.app))
		require.ErrorIs(t, b.UnfenceWrites(cctx, u.app), context.Canceled)
		_, err := b.Status(cctx)
		require.ErrorIs(t, err, context.Canceled)
		_, err = b.Prepared(cctx)
		require.ErrorIs(t, err, context.Canceled)
		_, err = b.Checksum(cctx, "items", adapters.ShardFn{})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestRealErrors checks the classification of what a real server sends.
func TestRealErrors(t *testing.T) {
	s := my.Get(t)
	ctx := t.Context()
	u := newEnvDB(t, s)
	adminExec(t, s, "", fmt.Sprintf("ALTER USER %s@'%%' ACCOUNT LOCK", mysqlad.QuoteIdent(u.app)))
	err := canLogin(s, u.db, u.app)
	require.True(t, mysqlad.IsFenceError(err), "%v", err)
	var be *adapters.BackendError
	require.ErrorAs(t, mysqlad.Classify("x", "Login", err), &be)
	require.Equal(t, mysqlad.CodeAccountLocked, be.Code)
	require.True(t, be.Fenced)

	err = canLogin(s, u.db, "no_such_user_at_all")
	require.Equal(t, "1045", mysqlad.Code(err), "%v", err)
	require.False(t, mysqlad.IsFenceError(err))
	require.NotErrorIs(t, mysqlad.Classify("x", "Login", err), adapters.ErrFenced)

	// A session killed while its account can still log in is a lost connection, not a fence.
	sess, err := login(ctx, s, u.db, u.other)
	require.NoError(t, err)
	defer sess.Close()
	var id string
	require.NoError(t, sess.(*appSession).conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
	adminExec(t, s, "", "KILL CONNECTION "+id)
	err = sess.Insert(ctx, conformance.BackendRow{ID: 1})
	require.True(t, mysqlad.IsConnLost(errors.Unwrap(err)), "%v", err)
	require.NotErrorIs(t, err, adapters.ErrFenced, "a killed session whose account logs in again is not fenced: %v", err)
	require.ErrorContains(t, err, "not ended by a fence")

	_, err = mysqlad.Open(ctx, "root@tcp(127.0.0.1:1)/?timeout=2s", mysqlad.Options{})
	require.ErrorContains(t, err, "127.0.0.1:1", "an unreachable server is named")
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.NotErrorIs(t, err, adapters.ErrFenced)
	require.NotErrorIs(t, mysqlad.Classify("x", "Login", canLogin(s, u.db, u.app)), adapters.ErrUnreachable, "a refused login reached the server")
}

// TestRealPrepared: XA branches of any shape are listed, named so XA COMMIT takes the name.
func TestRealPrepared(t *testing.T) {
	s := my.Get(t)
	ctx := t.Context()
	u := newEnvDB(t, s)
	adminExec(t, s, "", "CREATE TABLE "+mysqlad.QuoteIdent(u.db)+".xa (x int)")
	prepare := func(xid string) {
		db, err := sql.Open("mysql", s.RootDSN(u.db))
		require.NoError(t, err)
		defer db.Close()
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		var id uint64
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id))
		for _, q := range []string{"XA START " + xid, "INSERT INTO xa VALUES (1)", "XA END " + xid, "XA PREPARE " + xid} {
			_, err := conn.ExecContext(ctx, q)
			require.NoError(t, err, q)
		}
		conn.Raw(func(any) error { return driver.ErrBadConn }) // drop the connection: the branch detaches
		conn.Close()
		require.NoError(t, waitGone(ctx, s, id))
	}
	for _, mutant := range []string{"", "prepared-joins-data"} {
		prepare("'gtrid-1','bq',7")
		prepare("X'00ff27',X'',1")
		b := openBackend(t, s, s.RootDSN(u.db), mutant)
		xs, err := b.Prepared(ctx)
		require.NoError(t, err)
		gids := make([]string, len(xs))
		for i, x := range xs {
			gids[i] = x.GID
			require.Zero(t, x.Prepared, "XA RECOVER has no prepare time")
			require.Empty(t, x.Owner)
		}
		if mutant != "" {
			require.NotContains(t, gids, "X'67747269642d31',X'6271',7", "mutant %s", mutant)
			adminExec(t, s, "", "XA ROLLBACK 'gtrid-1','bq',7", "XA ROLLBACK X'00ff27'")
			continue
		}
		require.Equal(t, []string{"\x00\xff'", "X'67747269642d31',X'6271',7"}, gids)
		adminExec(t, s, u.db, "XA COMMIT "+gids[1], "XA ROLLBACK X'00ff27'")
		require.Equal(t, "1", s.QueryString(t, "SELECT COUNT(*) FROM "+mysqlad.QuoteIdent(u.db)+".xa"), "the gid committed the branch")
		xs, err = b.Prepared(ctx)
		require.NoError(t, err)
		require.Empty(t, xs)
	}
}

// TestRealUTF8MB4: every connection speaks utf8mb4, whatever charset the DSN asks for (a
// multi-byte charset such as gbk would read an escaped quote as part of a character).
func TestRealUTF8MB4(t *testing.T) {
	s := my.Get(t)
	for _, dsn := range []string{s.RootDSN(""), s.RootDSN("") + "&charset=gbk", s.RootDSN("") + "&charset=latin1&collation=latin1_swedish_ci"} {
		b, err := mysqlad.Open(t.Context(), dsn, mysqlad.Options{MaxConns: 1})
		require.NoError(t, err, dsn)
		var client, conn, results string
		require.NoError(t, mysqlad.DB(b).QueryRowContext(t.Context(), "SELECT @@character_set_client, @@character_set_connection, @@character_set_results").Scan(&client, &conn, &results))
		require.Equal(t, []string{"utf8mb4", "utf8mb4", "utf8mb4"}, []string{client, conn, results}, dsn)
		b.Close()
	}
}
