package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	mysqlad "loam.dev/router/adapters/mysql"
)

// TestRealFenceCutShortSettles: a FenceWrites whose context ends while its ALTER USER ...
// ACCOUNT LOCK still waits on the server must not return while that statement can still take
// effect. Here the statement waits for a table lock another session holds on the grant
// table, and the connection's close never reaches the server (a proxy keeps the server side
// open, as a partition would), so the server keeps waiting after the driver gave up. After
// FenceWrites returns its error, its server connection must be gone and the account's state
// final; the mutant that skips settling returns with the statement still waiting, and the
// lock lands once the table is free, after the caller was told the fence failed.
func TestRealFenceCutShortSettles(t *testing.T) {
	s := my.Get(t)
	proxy := keepServerSideOpen(t, s.Addr())
	const waitingQuery = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE CONCAT('ALTER USER `', ?, '`%ACCOUNT LOCK')"
	admin := openSQL(t, s.RootDSN(""))
	run := func(t *testing.T, mutant string) (envUsers, error) {
		u := newEnvDB(t, s)
		cfg, err := mysql.ParseDSN(s.RootDSN(u.db))
		require.NoError(t, err)
		cfg.Addr = proxy
		b := openBackend(t, s, cfg.FormatDSN(), mutant)

		// Hold a read lock on the grant table: reads go on, ALTER USER waits.
		holder, err := sql.Open("mysql", s.RootDSN(""))
		require.NoError(t, err)
		t.Cleanup(func() { holder.Close() })
		lock, err := holder.Conn(t.Context())
		require.NoError(t, err)
		_, err = lock.ExecContext(t.Context(), "LOCK TABLES mysql.global_priv READ")
		require.NoError(t, err)
		t.Cleanup(func() { lock.ExecContext(context.Background(), "UNLOCK TABLES"); lock.Close() })

		waiting := func() string { t.Helper(); return s.QueryString(t, waitingQuery, u.app) }
		// Cut the call short once its ALTER USER is seen waiting on the server.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			defer cancel()
			for ctx.Err() == nil {
				var n int
				if admin.QueryRowContext(ctx, waitingQuery, u.app).Scan(&n) == nil && n > 0 {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		err = b.FenceWrites(ctx, u.app)
		after := waiting()
		_, uerr := lock.ExecContext(t.Context(), "UNLOCK TABLES")
		require.NoError(t, uerr)
		t.Logf("ALTER USER statements still waiting when FenceWrites returned: %s", after)
		if mutant == "" {
			require.Equal(t, "0", after, "no statement of the failed fence may still be waiting")
		} else {
			require.Equal(t, "1", after, "mutant %s: the fence's ALTER USER still waits after the call returned", mutant)
		}
		return u, err
	}

	u, err := run(t, "")
	require.Error(t, err, "the lock never comes, so the call must fail")
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.NoError(t, canLogin(s, u.db, u.app), "the killed ALTER USER never locked the account")
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, canLogin(s, u.db, u.app), "the account's state is final once the call returned")

	u, err = run(t, "no-settle")
	require.Error(t, err)
	require.Eventually(t, func() bool { return mysqlad.IsFenceError(canLogin(s, u.db, u.app)) }, 5*time.Second, 10*time.Millisecond,
		"mutant no-settle: the lock lands once the grant table is free, after the caller was told the fence failed")
}

// keepServerSideOpen starts a TCP proxy to addr that forwards both ways but, when a client
// closes its connection, leaves the server's side open until the test ends: the server
// never learns that the client left.
func keepServerSideOpen(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c) }() // client gone: up stays open
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	return ln.Addr().String()
}
