package refrouter_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/refrouter"
)

// wireRig is the router suite's rig for a reference router behind its Server: the control
// plane drives it with the PgDog adapter over the admin database, clients write through the
// wire with the sharding key comment. What the suite checks of PgDog it checks here.
type wireRig struct {
	t    testing.TB
	b    *backendRig
	dir  string
	addr string
	rt   *refrouter.Router
	srv  *refrouter.Server
	inst *pgdog.Instance
}

func (r *wireRig) open(tb conformance.TB) {
	rt, err := refrouter.Open(refrouter.Options{ID: "ref-1", Dir: r.dir, Database: "app", User: appRole})
	require.NoError(tb, err)
	srv, err := refrouter.Listen(r.addr, refrouter.ServerOptions{Router: rt})
	require.NoError(tb, err)
	r.rt, r.srv, r.addr = rt, srv, srv.Addr()
	inst, err := pgdog.New(pgdog.Config{ID: "ref-1", Admin: adminDSN(r.addr, "admin-secret"), Dir: r.dir, Database: "app"})
	require.NoError(tb, err)
	r.inst = inst
}

func (r *wireRig) close() {
	r.inst.Close()
	r.srv.Close()
	r.rt.Close()
}

func adminDSN(addr, pw string) string {
	return (&url.URL{Scheme: "postgres", User: url.UserPassword("admin", pw), Host: addr, Path: "/admin", RawQuery: "sslmode=disable"}).String()
}

func clientDSN(addr, user, pw string) string {
	return (&url.URL{Scheme: "postgres", User: url.UserPassword(user, pw), Host: addr, Path: "/app", RawQuery: "sslmode=disable"}).String()
}

func (r *wireRig) Instance() adapters.RouterInstance { return r.inst }
func (r *wireRig) Database() string                  { return "app" }
func (r *wireRig) Backends() int                     { return len(r.b.names) }
func (r *wireRig) Files(t conformance.TB, g uint64, backends []int) render.Files {
	return r.b.files(r.t, g, backends)
}
func (r *wireRig) BadFiles(t conformance.TB, g uint64) render.Files {
	return (&refRig{t: r.t, b: r.b}).BadFiles(t, g)
}
func (r *wireRig) Write(t conformance.TB, key int64) <-chan error {
	ch := make(chan error, 1)
	addr := r.addr
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ch <- wireWrite(ctx, addr, key)
	}()
	return ch
}
func (r *wireRig) Holders(t conformance.TB, key int64) []int { return r.b.holders(r.t, key) }
func (r *wireRig) Settle(conformance.TB)                     { time.Sleep(25 * time.Millisecond) }
func (r *wireRig) Restart(t conformance.TB) {
	r.close()
	r.open(t)
}

// wireWrite inserts key through the router at addr on a connection of its own.
func wireWrite(ctx context.Context, addr string, key int64) error {
	conn, err := pgconn.Connect(ctx, clientDSN(addr, appRole, "app-secret"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	sql, err := refrouter.WithShardingKey(key, fmt.Sprintf("INSERT INTO t (id) VALUES (%d)", key))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return postgres.Classify(addr, "Exec", err)
	}
	return nil
}

// TestRealServedRouterSuite runs the router contract against a reference router served on
// the wire and driven by the PgDog adapter, as a controller in another process drives it.
func TestRealServedRouterSuite(t *testing.T) {
	srv := startServer(t)
	conformance.RunRouterSuite(t, conformance.RouterHarness{
		Route: func(key int64, n int) int { return int(pghash.ShardOfInt8(key, uint64(n))) },
		Open: func(tb conformance.TB) conformance.RouterRig {
			b := newBackends(t, srv, 3, tableDDL)
			dir := t.TempDir()
			writeFiles(tb, dir, 1, b.files(t, 1, []int{0, 1}))
			rig := &wireRig{t: t, b: b, dir: dir, addr: "127.0.0.1:0"}
			rig.open(tb)
			tb.Cleanup(func() { rig.close() })
			return rig
		},
	})
}

// servedRouter serves a router over one shard of a real server; closed when t ends.
func servedRouter(t *testing.T) (*backendRig, *refrouter.Server) {
	t.Helper()
	srv := startServer(t)
	b := newBackends(t, srv, 1, tableDDL)
	rt := openRouter(t, b, []int{0})
	s, err := refrouter.Listen("127.0.0.1:0", refrouter.ServerOptions{Router: rt})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return b, s
}

// TestRealServedLogins: every login is checked (SCRAM) against the loaded files: a wrong
// password, a user the files do not have, the admin user on the client database, a
// client user on the admin database are all refused with 28P01; the right ones get in.
func TestRealServedLogins(t *testing.T) {
	_, s := servedRouter(t)
	ctx := t.Context()
	for _, c := range []struct {
		dsn string
		ok  bool
	}{
		{adminDSN(s.Addr(), "admin-secret"), true},
		{clientDSN(s.Addr(), appRole, "app-secret"), true},
		{adminDSN(s.Addr(), "wrong"), false},
		{adminDSN(s.Addr(), ""), false},
		{clientDSN(s.Addr(), appRole, "admin-secret"), false},
		{clientDSN(s.Addr(), "admin", "admin-secret"), false},
		{clientDSN(s.Addr(), "nobody", "app-secret"), false},
		{strings.Replace(adminDSN(s.Addr(), "app-secret"), "admin:", appRole+":", 1), false},
	} {
		conn, err := pgconn.Connect(ctx, c.dsn)
		if c.ok {
			require.NoError(t, err, c.dsn)
			conn.Close(ctx)
			continue
		}
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe, c.dsn)
		require.Equal(t, "28P01", pe.Code, c.dsn)
	}
}

// TestServedRefusesNonLoopback: the server speaks no TLS, so it will not listen off
// loopback.
func TestServedRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "localhost:0"} {
		_, err := refrouter.Listen(addr, refrouter.ServerOptions{Router: &refrouter.Router{}})
		require.ErrorIs(t, err, refrouter.ErrNotLoopback, addr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	_, err = refrouter.Serve(ln, refrouter.ServerOptions{})
	require.Error(t, err, "a server needs a router")
}

// TestRealServedFenceRelayed: a write through the wire to a fenced backend is refused
// with the shard's SQLSTATE, which the client reads as a fence (ErrFenced), and is not
// applied; a statement without a sharding key comment is refused, not scattered.
func TestRealServedFenceRelayed(t *testing.T) {
	b, s := servedRouter(t)
	ctx := t.Context()
	require.NoError(t, wireWrite(ctx, s.Addr(), 1))
	require.Equal(t, []int{0}, b.holders(t, 1))

	conn, err := pgconn.Connect(ctx, clientDSN(s.Addr(), appRole, "app-secret"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "INSERT INTO t (id) VALUES (99)").ReadAll()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "0A000", pe.Code)
	require.Empty(t, b.holders(t, 99))

	admin := b.srv.Connect(t, "postgres")
	_, err = admin.Exec(ctx, "ALTER ROLE "+appRole+" NOLOGIN")
	require.NoError(t, err)
	defer admin.Exec(context.Background(), "ALTER ROLE "+appRole+" LOGIN")
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1 AND application_name LIKE 'refrouter%'", appRole)
	require.NoError(t, err)
	for k := int64(2); k < 6; k++ {
		sql, _ := refrouter.WithShardingKey(k, fmt.Sprintf("INSERT INTO t (id) VALUES (%d)", k))
		_, err := conn.Exec(ctx, sql).ReadAll()
		require.ErrorIs(t, postgres.Classify("ref", "Exec", err), adapters.ErrFenced, "key %d: %v", k, err)
		require.Empty(t, b.holders(t, k))
	}
}

// TestRealServedCutControlPlane: SetUnreachable leaves clients writing and the control
// plane without an answer: the PgDog adapter's command fails as unreachable.
func TestRealServedCutControlPlane(t *testing.T) {
	b, s := servedRouter(t)
	inst, err := pgdog.New(pgdog.Config{ID: "ref-1", Admin: adminDSN(s.Addr(), "admin-secret"), Database: "app", ConnectTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer inst.Close()
	ctx := t.Context()
	_, err = inst.Observe(ctx)
	require.NoError(t, err)
	s.SetUnreachable(true)
	err = inst.Pause(ctx, "app")
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.NoError(t, wireWrite(ctx, s.Addr(), 5), "clients still write while the control plane is cut")
	require.Equal(t, []int{0}, b.holders(t, 5))
	s.SetUnreachable(false)
	o, err := inst.Observe(ctx)
	require.NoError(t, err)
	require.Empty(t, o.Paused, "the PAUSE sent while cut never arrived")
	require.True(t, o.GenerationKnown)
	require.Equal(t, uint64(1), o.Generation)
}

var _ = errors.New

// TestRealServedPauseAll: a Pause and Resume of every database ("") through the PgDog
// adapter (MAINTENANCE ON and PAUSE <user> <db>, then a bare RESUME and MAINTENANCE OFF)
// hold a write and release it. A bare RESUME once made the admin server index its
// arguments at -1.
func TestRealServedPauseAll(t *testing.T) {
	srv := startServer(t)
	b := newBackends(t, srv, 2, tableDDL)
	dir := t.TempDir()
	writeFiles(t, dir, 1, b.files(t, 1, []int{0, 1}))
	rig := &wireRig{t: t, b: b, dir: dir, addr: "127.0.0.1:0"}
	rig.open(t)
	t.Cleanup(rig.close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, rig.inst.Pause(ctx, ""))
	held := rig.Write(t, 7)
	require.Eventually(t, func() bool { return rig.rt.Held() == 1 }, time.Minute, time.Millisecond, "the write is held")
	require.NoError(t, rig.inst.Resume(ctx, ""))
	require.NoError(t, <-held)
	require.Len(t, b.holders(t, 7), 1)
}
