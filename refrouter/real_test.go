package refrouter_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

// appRole is the role the routers log in as: the one a fence would make NOLOGIN.
const appRole = "app"

var rigSeq atomic.Int64

// backendRig is a set of shard databases on one real server, each with table t.
type backendRig struct {
	srv   *pgtest.Server
	names []string
}

func newBackends(t testing.TB, srv *pgtest.Server, n int, ddl string) *backendRig {
	t.Helper()
	b := &backendRig{srv: srv}
	id := rigSeq.Add(1)
	for i := range n {
		name := fmt.Sprintf("rig%d_b%d", id, i)
		srv.CreateDatabase(t, name)
		srv.Exec(t, name, ddl)
		b.names = append(b.names, name)
	}
	return b
}

// record is a PgDog record of database "app" hash-sharded on t.id over the given backends.
func (b *backendRig) record(g uint64, backends []int) *shardmap.Record {
	var bs []shardmap.Backend
	for _, i := range backends {
		bs = append(bs, shardmap.Backend{Host: "127.0.0.1", Port: uint16(b.srv.Port), Database: b.names[i]})
	}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, bs...)
	rec.Generation = g
	return rec
}

var creds = render.Credentials{
	Users: []render.User{{Name: appRole, Password: "app-secret"}},
	Admin: render.Admin{Password: "admin-secret"},
}

func (b *backendRig) files(t testing.TB, g uint64, backends []int) render.Files {
	t.Helper()
	fs, err := render.PgDog(b.record(g, backends), creds, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	return fs
}

func (b *backendRig) holders(t testing.TB, key int64) []int {
	t.Helper()
	var out []int
	for i, name := range b.names {
		conn := b.srv.Connect(t, name)
		var n int
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM t WHERE id = $1", key).Scan(&n))
		conn.Close(context.Background())
		for range n {
			out = append(out, i)
		}
	}
	return out
}

// refRig is the router suite's rig for the reference router on real Postgres.
type refRig struct {
	t  testing.TB
	b  *backendRig
	rt *refrouter.Router
}

func (r *refRig) Instance() adapters.RouterInstance { return r.rt }
func (r *refRig) Database() string                  { return "app" }
func (r *refRig) Backends() int                     { return len(r.b.names) }
func (r *refRig) Files(t conformance.TB, g uint64, backends []int) render.Files {
	return r.b.files(r.t, g, backends)
}
func (r *refRig) BadFiles(t conformance.TB, g uint64) render.Files {
	fs, err := render.NewFiles(render.File{Name: refrouter.ConfigFile, Data: []byte("[[databases]]\nname = \"app\"\nshard = \"zero\"\n")})
	require.NoError(t, err)
	return fs
}
func (r *refRig) Write(t conformance.TB, key int64) <-chan error {
	ch := make(chan error, 1)
	rt := r.rt
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := rt.Exec(ctx, key, "INSERT INTO t (id) VALUES ($1)", key)
		ch <- err
	}()
	return ch
}
func (r *refRig) Holders(t conformance.TB, key int64) []int { return r.b.holders(r.t, key) }
func (r *refRig) Settle(conformance.TB)                     { time.Sleep(25 * time.Millisecond) }
func (r *refRig) Restart(t conformance.TB) {
	r.rt.Close()
	rt, err := refrouter.Open(r.rt.Options())
	require.NoError(t, err)
	r.rt = rt
}

const tableDDL = "CREATE TABLE t (id bigint PRIMARY KEY); GRANT ALL ON t TO " + appRole

// TestRealRouterSuite runs the router contract against the reference router, its shards
// databases on a real Postgres, its files rendered by kernel/render.
func TestRealRouterSuite(t *testing.T) {
	srv := startServer(t)
	conformance.RunRouterSuite(t, conformance.RouterHarness{
		Route: func(key int64, n int) int { return int(pghash.ShardOfInt8(key, uint64(n))) },
		Open: func(tb conformance.TB) conformance.RouterRig {
			b := newBackends(t, srv, 3, tableDDL)
			dir := t.TempDir()
			writeFiles(tb, dir, 1, b.files(t, 1, []int{0, 1}))
			rt, err := refrouter.Open(refrouter.Options{ID: "ref-1", Dir: dir, Database: "app", User: appRole})
			require.NoError(tb, err)
			rig := &refRig{t: t, b: b, rt: rt}
			tb.Cleanup(func() { rig.rt.Close() })
			return rig
		},
	})
}

// TestRealRoutesAsPostgresPartitions: every row the router sends to shard i of n satisfies
// Postgres's own hash partition constraint for remainder i, modulus n, checked by the server
// (satisfies_hash_partition against a PARTITION BY HASH table of the same key type).
func TestRealRoutesAsPostgresPartitions(t *testing.T) {
	srv := startServer(t)
	ddl := tableDDL + "; CREATE TABLE p (id bigint) PARTITION BY HASH (id)"
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			b := newBackends(t, srv, n, ddl)
			layout := make([]int, n)
			for i := range layout {
				layout[i] = i
			}
			rt := openRouter(t, b, layout)
			ctx := context.Background()
			for k := int64(-300); k < 300; k++ {
				key := k * 104729
				res, err := rt.Exec(ctx, key, "INSERT INTO t (id) VALUES ($1)", key)
				require.NoError(t, err)
				require.Equal(t, uint64(1), res.Generation)
			}
			for i, name := range b.names {
				conn := srv.Connect(t, name)
				var rows, bad int
				require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT satisfies_hash_partition('p'::regclass, $1, $2, id)) FROM t`,
					n, i).Scan(&rows, &bad))
				require.NotZero(t, rows, "shard %d received no rows", i)
				require.Zero(t, bad, "rows on shard %d that Postgres would put in another partition of %d", i, n)
			}
		})
	}
}

// TestRealFenceRefusesRouter: once the backend fences the router's role (NOLOGIN, then its
// sessions terminated), Exec fails with adapters.ErrFenced keeping the SQLSTATE, and the
// write is not applied.
func TestRealFenceRefusesRouter(t *testing.T) {
	srv := startServer(t)
	b := newBackends(t, srv, 1, tableDDL)
	rt := openRouter(t, b, []int{0})
	ctx := context.Background()
	_, err := rt.Exec(ctx, 1, "INSERT INTO t (id) VALUES ($1)", 1) // opens a pooled session
	require.NoError(t, err)

	admin := srv.Connect(t, "postgres")
	_, err = admin.Exec(ctx, "ALTER ROLE "+appRole+" NOLOGIN")
	require.NoError(t, err)
	defer admin.Exec(ctx, "ALTER ROLE "+appRole+" LOGIN")
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", appRole)
	require.NoError(t, err)

	codes := map[string]int{}
	for k := int64(2); k < 12; k++ {
		_, err := rt.Exec(ctx, k, "INSERT INTO t (id) VALUES ($1)", k)
		require.ErrorIs(t, err, adapters.ErrFenced, "write of key %d after the fence", k)
		var be *adapters.BackendError
		require.ErrorAs(t, err, &be)
		codes[be.Code]++
		require.Empty(t, b.holders(t, k), "a refused write must not be applied")
	}
	require.NotZero(t, codes["28000"]+codes["57P01"], "codes seen: %v", codes)
	t.Logf("fence errors by SQLSTATE: %v", codes)
}

// TestRealResumeStartsOnNewSessions: a fence raised and lowered while an instance is paused
// (a rolled-back cutover) is not seen by the statements the pause held, even when a session
// was opened during the pause (by a statement routed before it) and the fence ended it.
func TestRealResumeStartsOnNewSessions(t *testing.T) {
	srv := startServer(t)
	b := newBackends(t, srv, 1, tableDDL)
	rt := openRouter(t, b, []int{0})
	ctx := context.Background()
	_, err := rt.Exec(ctx, 1, "INSERT INTO t (id) VALUES ($1)", 1)
	require.NoError(t, err)
	require.NoError(t, rt.Pause(ctx, "app"))
	require.NoError(t, rt.OpenIdleSessions(ctx))

	admin := srv.Connect(t, "postgres")
	_, err = admin.Exec(ctx, "ALTER ROLE "+appRole+" NOLOGIN")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", appRole)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", appRole).Scan(&n))
		return n == 0
	}, time.Minute, 5*time.Millisecond, "the fence's terminated sessions are gone")
	_, err = admin.Exec(ctx, "ALTER ROLE "+appRole+" LOGIN")
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := rt.Exec(ctx, 2, "INSERT INTO t (id) VALUES ($1)", 2)
		done <- err
	}()
	require.Eventually(t, func() bool { return rt.Held() == 1 }, time.Minute, time.Millisecond)
	require.NoError(t, rt.Resume(ctx, "app"))
	require.NoError(t, <-done, "the held write ran on a session the fence ended")
	require.Equal(t, []int{0}, b.holders(t, 2))
}

// TestRealPausedExecHonoursContext: a statement held by a pause gives up when its context
// ends, and is never sent afterwards.
func TestRealPausedExecHonoursContext(t *testing.T) {
	srv := startServer(t)
	b := newBackends(t, srv, 1, tableDDL)
	rt := openRouter(t, b, []int{0})
	require.NoError(t, rt.Pause(context.Background(), "app"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := rt.Exec(ctx, 7, "INSERT INTO t (id) VALUES ($1)", 7)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Zero(t, rt.Held())
	require.NoError(t, rt.Resume(context.Background(), "app"))
	time.Sleep(20 * time.Millisecond)
	require.Empty(t, b.holders(t, 7))
}

// TestRealFleetLoad runs a small load through a fleet and checks every acknowledged write
// is stored exactly once, where its Result says.
func TestRealFleetLoad(t *testing.T) {
	srv := startServer(t)
	ddl := "CREATE TABLE t (id bigint PRIMARY KEY, worker int, seq bigint, router text); GRANT ALL ON t TO " + appRole
	b := newBackends(t, srv, 2, ddl)
	f, err := refrouter.OpenFleet(refrouter.FleetOptions{Root: t.TempDir(), N: 3, Database: "app", User: appRole, Files: b.files(t, 1, []int{0, 1}), Generation: 1})
	require.NoError(t, err)
	defer f.Close()
	l := f.StartLoad(context.Background(), refrouter.LoadOptions{Workers: 4, Table: "t"})
	time.Sleep(300 * time.Millisecond)
	writes := l.Stop()
	acked, fenced, failed := refrouter.Tally(writes)
	require.NotZero(t, acked)
	require.Zero(t, fenced)
	// Writes cut short by Stop fail with context.Canceled; nothing else may fail.
	for _, w := range writes {
		if !w.Acked() {
			require.ErrorIs(t, w.Err, context.Canceled)
		}
	}
	t.Logf("acked %d, failed %d (cancelled by Stop)", acked, failed)
	routers := map[string]bool{}
	for _, w := range writes {
		if !w.Acked() {
			continue
		}
		routers[w.Router] = true
		want := []int{int(pghash.ShardOfInt8(w.Key, 2))}
		require.Equal(t, want, b.holders(t, w.Key), "key %d", w.Key)
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d/%s", srv.Port, b.names[want[0]]), w.Result.Backend)
		if len(routers) == 3 && w.Seq > 20 {
			break // enough rows checked one by one; the count check below covers the rest
		}
	}
	var total int
	for _, name := range b.names {
		conn := srv.Connect(t, name)
		var n int
		require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n))
		total += n
	}
	// A write cancelled in flight may or may not have committed; nothing else may be stored.
	require.GreaterOrEqual(t, total, acked, "every acknowledged write is stored")
	require.LessOrEqual(t, total, acked+failed, "nothing but this load's writes is stored")
	require.Len(t, routers, 3, "the load spreads over every instance")
}

// writeFiles lays out dir with the files of generation g, as a router's directory is.
func writeFiles(t conformance.TB, dir string, g uint64, fs render.Files) {
	t.Helper()
	d, err := configmap.NewDir(dir)
	require.NoError(t, err)
	require.NoError(t, d.WriteFiles(context.Background(), g, fs))
}

// openRouter opens instance ref-1 on files of generation 1 over backends, closed when t ends.
func openRouter(t *testing.T, b *backendRig, backends []int) *refrouter.Router {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, 1, b.files(t, 1, backends))
	rt, err := refrouter.Open(refrouter.Options{ID: "ref-1", Dir: dir, Database: "app", User: appRole})
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

// TestRealSwapIsCutoverInMemory: Swap routes the database's clients to what the files call
// the reshard destination, as PgDog's CUTOVER does in memory; a reload puts the files'
// routing back.
func TestRealSwapIsCutoverInMemory(t *testing.T) {
	srv := startServer(t)
	b := newBackends(t, srv, 2, tableDDL)
	rec := b.record(4, []int{0})
	target := b.record(4, []int{1}).Layout
	rec.Target = &target
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: 5}
	c := creds
	c.SchemaAdmin = render.User{Name: "migrator", Password: "m"}
	fs, err := render.PgDog(rec, c, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	dir := t.TempDir()
	writeFiles(t, dir, rec.Generation, fs)
	rt, err := refrouter.Open(refrouter.Options{ID: "ref-1", Dir: dir, Database: "app", User: appRole})
	require.NoError(t, err)
	defer rt.Close()
	ctx := context.Background()
	insert := func(key int64) refrouter.Result {
		res, err := rt.Exec(ctx, key, "INSERT INTO t (id) VALUES ($1)", key)
		require.NoError(t, err)
		return res
	}
	insert(1)
	require.Equal(t, []int{0}, b.holders(t, 1))
	require.NoError(t, rt.Swap("app", render.ReshardDatabase("app", 4)))
	insert(2)
	require.Equal(t, []int{1}, b.holders(t, 2), "after the swap, app's clients reach the destination")
	require.Error(t, rt.Swap("app", "nope"), "both databases must be loaded")
	require.NoError(t, rt.Reload(ctx))
	insert(3)
	require.Equal(t, []int{0}, b.holders(t, 3), "a reload routes by the files again")
}
