package postgres_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/pgtest"
)

// TestRealFenceCutShortSettles: a FenceWrites whose context ends while its COMMIT is still
// running on the server must not return while that COMMIT can still take effect. Here the
// COMMIT waits for a synchronous standby that does not exist, and the cancel request pgx
// sends when the context ends is lost on the way (a proxy drops it, as a partition would).
// Postgres makes a commit visible only when that wait ends, so the NOLOGIN would land at
// some later moment nobody chose. After FenceWrites returns its error, its server session
// must be gone and the role's login state final; the mutant that skips settling returns
// with the session still waiting and the NOLOGIN still to land.
func TestRealFenceCutShortSettles(t *testing.T) {
	s := pgtest.Start(t, append(serverSettings,
		pgtest.WithSetting("synchronous_standby_names", "nobody"),
		pgtest.WithSetting("synchronous_commit", "on"))...)
	proxy := dropCancelRequests(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)))
	read := func(sql string) string { t.Helper(); return s.QueryString(t, "postgres", sql) }
	waiting := func() string {
		return read("SELECT count(*)::text FROM pg_stat_activity WHERE application_name = 'fence-under-test' AND wait_event = 'SyncRep'")
	}
	canLogin := func(role string) string {
		return read("SELECT rolcanlogin::text FROM pg_roles WHERE rolname = '" + role + "'")
	}
	run := func(t *testing.T, role, mutant string) error {
		conn := s.Connect(t, "postgres")
		_, err := conn.Exec(t.Context(), "SET synchronous_commit = local; CREATE ROLE "+role+" LOGIN")
		require.NoError(t, err)
		u, _ := url.Parse(s.DSN("postgres"))
		u.Host = proxy
		q := u.Query()
		q.Set("application_name", "fence-under-test")
		u.RawQuery = q.Encode()
		b, err := postgres.Open(t.Context(), u.String(), postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		if mutant != "" {
			postgres.Mutate(b, mutant)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		return b.FenceWrites(ctx, role)
	}

	err := run(t, "cs_app", "")
	require.Error(t, err, "the commit never returns, so the call must fail")
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Equal(t, "0", waiting(), "no session of the failed fence may still be committing")
	final := canLogin("cs_app")
	require.Equal(t, "false", final, "ending the session ended the wait: the locally committed NOLOGIN is visible")
	time.Sleep(200 * time.Millisecond)
	require.Equal(t, final, canLogin("cs_app"), "the login state is final once the call returned")

	err = run(t, "cs_mut", "no-settle")
	require.Error(t, err)
	require.Equal(t, "1", waiting(), "mutant no-settle: the fence's session is still waiting to commit after the call returned")
	require.Equal(t, "true", canLogin("cs_mut"), "mutant no-settle: the NOLOGIN has not landed yet...")
	read("SELECT pg_terminate_backend(pid)::text FROM pg_stat_activity WHERE application_name = 'fence-under-test' AND wait_event = 'SyncRep'")
	require.Eventually(t, func() bool { return canLogin("cs_mut") == "false" }, 5*time.Second, 10*time.Millisecond,
		"mutant no-settle: ...and lands when anything ends the wait, after the caller was told the fence failed")
}

// dropCancelRequests starts a TCP proxy to addr that forwards every connection except
// CancelRequest packets, which it swallows: pgx's cancel on a context's end never arrives.
func dropCancelRequests(t *testing.T, addr string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var head [8]byte
				if _, err := io.ReadFull(c, head[:]); err != nil {
					return
				}
				// A CancelRequest is 16 bytes: length 16, code 80877102, pid, key.
				if binary.BigEndian.Uint32(head[:4]) == 16 && binary.BigEndian.Uint32(head[4:]) == 80877102 {
					return
				}
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				if _, err := up.Write(head[:]); err != nil {
					return
				}
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }()
				go func() { io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}
