package pgdog_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/pgdogtest"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
)

// TestRealPgDogApplyReloadsAndReadsGeneration: Apply writes the files where the instance
// reads them, RELOAD loads them, and the generation marker shows in SHOW POOLS.
func TestRealPgDogApplyReloadsAndReadsGeneration(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "gen", 3, true)
	_, i := startPgDog(t, realRecord(srv, 1, dbs[0]))
	ctx := context.Background()
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.True(t, o.GenerationKnown)
	require.Equal(t, uint64(1), o.Generation)
	require.Contains(t, o.Version, "PgDog")
	for _, step := range []struct {
		g uint64
		n int
	}{{2, 2}, {3, 3}, {7, 1}} {
		rec := realRecord(srv, step.g, dbs[:step.n]...)
		a, err := i.Apply(ctx, step.g, renderFiles(t, rec))
		require.NoError(t, err)
		require.Equal(t, step.g, a.Generation)
		o, err := i.Observe(ctx)
		require.NoError(t, err)
		require.Equal(t, step.g, o.Generation)
		pools, err := i.Pools(ctx)
		require.NoError(t, err)
		var got []render.PoolRow
		for _, p := range pools {
			got = append(got, p.Row())
		}
		want, err := render.ExpectedPools(rec, testCreds, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
		require.NoError(t, err)
		require.ElementsMatch(t, want, got, "generation %d: the pools PgDog loaded are the ones the files make", step.g)
	}
}

// TestRealPgDogApplyOfBadFilesKeepsOldConfig: a RELOAD of files PgDog cannot parse fails
// (the adapter's ErrExecution, PgDog's SQLSTATE kept) and the loaded config stays.
func TestRealPgDogApplyOfBadFilesKeepsOldConfig(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "bad", 1, true)
	_, i := startPgDog(t, realRecord(srv, 1, dbs...))
	ctx := context.Background()
	bad, err := render.NewFiles(render.File{Name: render.PgDogConfigFile, Data: []byte("[[databases]\n")})
	require.NoError(t, err)
	_, err = i.Apply(ctx, 2, bad)
	require.ErrorIs(t, err, pgdog.ErrExecution)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "Reload", re.Op)
	require.NotEmpty(t, re.Code, "PgDog's SQLSTATE is kept")
	o, err := i.Observe(ctx)
	require.NoError(t, err, "the adapter reconnects if PgDog closed the connection")
	require.Equal(t, uint64(1), o.Generation, "a RELOAD that fails keeps the config that was loaded")
}

// TestRealPgDogApplyToAnotherDirectoryIsNotLoaded: an instance not started on Config.Dir
// reloads its own files, and Apply says so.
func TestRealPgDogApplyToAnotherDirectoryIsNotLoaded(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "dir", 1, true)
	p, _ := startPgDog(t, realRecord(srv, 1, dbs...))
	i, err := pgdog.New(pgdog.Config{ID: "pgdog-1", Admin: p.AdminDSN(adminPassword), Dir: t.TempDir(), Database: "app"})
	require.NoError(t, err)
	defer i.Close()
	_, err = i.Apply(context.Background(), 3, renderFiles(t, realRecord(srv, 3, dbs...)))
	require.ErrorIs(t, err, pgdog.ErrNotLoaded)
}

// TestRealPgDogPauseHoldsResumeReleases: PAUSE app holds a client's next query; RESUME
// releases it; the pause shows in SHOW POOLS and survives a RELOAD.
func TestRealPgDogPauseHoldsResumeReleases(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "pause", 2, true)
	p, i := startPgDog(t, realRecord(srv, 1, dbs...))
	ctx := context.Background()
	c := clientConn(t, p, "app")
	_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES (1, 'a')")
	require.NoError(t, err, p.LogTail())

	require.NoError(t, i.Pause(ctx, "app"))
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"app"}, o.Paused)
	_, err = i.Apply(ctx, 2, renderFiles(t, realRecord(srv, 2, dbs...)))
	require.NoError(t, err)
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	pausedAfterReload := slicesContains(o.Paused, "app")
	t.Logf("paused after RELOAD: %v", o.Paused)

	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES (2, 'b')")
		done <- err
	}()
	if pausedAfterReload {
		select {
		case err := <-done:
			t.Fatalf("a write went through a paused pool: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		require.Empty(t, holders(t, srv, dbs, 2), "held, not sent")
	}
	require.NoError(t, i.Resume(ctx, "app"))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("RESUME did not release the held write")
	}
	require.Equal(t, []int{int(pghash.ShardOfInt8(2, 2))}, holders(t, srv, dbs, 2))
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	require.Empty(t, o.Paused)
	require.True(t, pausedAfterReload, "PAUSE survives RELOAD")
}

// TestRealPgDogHeldWriteRoutedByTheLayoutInForce: a write Pause holds while the instance
// reloads onto another layout is routed, once Resume releases it, by the layout then
// loaded. Held by PAUSE <db> alone, it had been routed before the hold: the reload took
// its pool offline and PgDog retried it on the new pools with the shard index the old
// layout gave it (pgdog/src/backend/pool/connection/mod.rs, Connection::connect), the
// rows the fenced cutover found on the destination shard with their source shard's index.
func TestRealPgDogHeldWriteRoutedByTheLayoutInForce(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "held", 3, true)
	p, i := startPgDog(t, realRecord(srv, 1, dbs[:2]...))
	ctx := context.Background()
	c := clientConn(t, p, "app")
	var key int64 = 1 // a key the two layouts put on shards of different indexes
	for pghash.ShardOfInt8(key, 2) == pghash.ShardOfInt8(key, 3) {
		key++
	}
	_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES (0, 'before')")
	require.NoError(t, err, p.LogTail())

	require.NoError(t, i.Pause(ctx, "app"))
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES ("+strconv.FormatInt(key, 10)+", 'held')")
		done <- err
	}()
	waitClientWaiting(t, i, p)
	_, err = i.Apply(ctx, 2, renderFiles(t, realRecord(srv, 2, dbs...)))
	require.NoError(t, err)
	select {
	case err := <-done:
		t.Fatalf("the held write went through before Resume: %v", err)
	default:
	}
	require.NoError(t, i.Resume(ctx, "app"))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Resume did not release the held write")
	}
	require.Equal(t, []int{int(pghash.ShardOfInt8(key, 3))}, holders(t, srv, dbs, key),
		"key %d is on the shard the reloaded three-shard layout routes it to, not on shard %d, its index in the two-shard layout", key, pghash.ShardOfInt8(key, 2))
}

// waitClientWaiting waits until SHOW CLIENTS lists a client of app held ("waiting").
func waitClientWaiting(t *testing.T, i *pgdog.Instance, p *pgdogtest.Instance) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := i.Exec(context.Background(), "ShowClients", "SHOW CLIENTS")
		require.NoError(t, err)
		col := map[string]int{}
		for j, c := range r.Columns {
			col[c] = j
		}
		for _, row := range r.Rows {
			if string(row[col["database"]]) == "app" && string(row[col["user"]]) == "app" && string(row[col["state"]]) == "waiting" {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "no client of app is held: %q\n%s", r.Rows, p.LogTail())
		time.Sleep(20 * time.Millisecond)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestRealPgDogErrorsTheAdapterMaps: a syntax error keeps the connection (ErrSyntax,
// 08P01); a wrong password is not an unreachable instance; a stopped instance is; a
// restarted one answers again.
func TestRealPgDogErrorsTheAdapterMaps(t *testing.T) {
	srv := realServer(t)
	dbs := shards(t, srv, "err", 1, true)
	p, i := startPgDog(t, realRecord(srv, 1, dbs...))
	ctx := context.Background()

	_, err := i.Exec(ctx, "raw", "FROBNICATE")
	require.ErrorIs(t, err, pgdog.ErrSyntax)
	require.NotErrorIs(t, err, pgdog.ErrExecution)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "08P01", re.Code)
	_, err = i.Settings(ctx)
	require.NoError(t, err)

	err = i.Cutover(ctx, 999)
	require.Error(t, err)
	require.ErrorIs(t, err, pgdog.ErrExecution, "CUTOVER with nothing to cut over")
	res, err := i.Stop(ctx, 999)
	require.NoError(t, err)
	require.Equal(t, pgdog.TaskNotFound, res)

	wrong, err := pgdog.New(pgdog.Config{ID: "pgdog-1", Admin: p.AdminDSN("wrong"), Database: "app"})
	require.NoError(t, err)
	defer wrong.Close()
	err = wrong.Reload(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, adapters.ErrUnreachable, "the instance answered: the login is wrong")
	require.ErrorAs(t, err, &re)
	require.NotEmpty(t, re.Code)

	p.Kill()
	_, err = i.Observe(ctx)
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	p.Restart(t)
	waitAdmin(t, i, p)
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), o.Generation, "a restarted instance reads its files")
}

// TestRealPgDogCopyDataCutoverStop: the commands the cutover issues on its designated
// instance, on real Postgres: COPY_DATA copies and streams, SHOW TASKS reaches
// replicating, CUTOVER swaps the names in memory (app's clients now reach the destination),
// the reverse stream shows as a task, STOP_TASK stops it, and a RELOAD puts the files'
// routing back.
func TestRealPgDogCopyDataCutoverStop(t *testing.T) {
	srv := realServer(t)
	if v := srv.QueryString(t, "postgres", "SHOW server_version_num"); v < "160000" {
		// PgDog's schema sync calls pg_get_publication_tables(text[]) (Postgres 16+);
		// on an older server the COPY_DATA task fails (recorded in testdata/transcript.json).
		t.Skipf("skipped: needs postgres 16+ for PgDog's COPY_DATA (server_version_num %s)", v)
	}
	src := shards(t, srv, "csrc", 1, true)
	dst := shards(t, srv, "cdst", 2, false)
	rec := realResharding(srv, realRecord(srv, 4, src...), dst...)
	p, i := startPgDog(t, rec)
	ctx := context.Background()
	c := clientConn(t, p, "app")
	for k := int64(1); k <= 20; k++ {
		_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES ("+strconv.FormatInt(k, 10)+", 'before')")
		require.NoError(t, err, p.LogTail())
	}
	dstDB := render.ReshardDatabase("app", 4)
	task, err := i.CopyData(ctx, "app", dstDB, "loam_pub", "loam_slot_c")
	require.NoError(t, err, p.LogTail())
	waitTask(t, i, p, task, "replicating")
	for k := int64(21); k <= 30; k++ {
		_, err := c.Exec(ctx, "INSERT INTO orders (id, v) VALUES ("+strconv.FormatInt(k, 10)+", 'streamed')")
		require.NoError(t, err)
	}
	slots, err := i.ReplicationSlots(ctx)
	require.NoError(t, err)
	t.Logf("slots: %+v", slots)
	// What the cutover machine waits for (the lag), here the rows themselves: PgDog's
	// CUTOVER goes at once when its stream has applied no transaction yet (seen: key 22
	// missing from the destination after it).
	for k := int64(21); k <= 30; k++ {
		deadline := time.Now().Add(2 * time.Minute)
		for len(holders(t, srv, dst, k)) == 0 {
			require.True(t, time.Now().Before(deadline), "key %d never streamed\n%s", k, p.LogTail())
			time.Sleep(100 * time.Millisecond)
		}
	}

	require.NoError(t, i.Cutover(ctx, task), p.LogTail())
	tasks, err := i.Tasks(ctx)
	require.NoError(t, err)
	t.Logf("tasks after CUTOVER: %+v", tasks)
	reverse, found := int64(0), false // PgDog's ids start at 0: 0 is a task, not "none"
	for _, tk := range tasks {
		if tk.ID != task && tk.Status != "finished" {
			reverse, found = tk.ID, true
		}
	}
	for k := int64(1); k <= 30; k++ {
		require.Equal(t, []int{int(pghash.ShardOfInt8(k, 2))}, holders(t, srv, dst, k), "key %d copied or streamed to its destination shard", k)
	}
	c2 := clientConn(t, p, "app")
	_, err = c2.Exec(ctx, "INSERT INTO orders (id, v) VALUES (1001, 'after')")
	require.NoError(t, err, p.LogTail())
	require.Equal(t, []int{int(pghash.ShardOfInt8(1001, 2))}, holders(t, srv, dst, 1001), "after CUTOVER app's clients reach the destination")
	require.Empty(t, holders(t, srv, src, 1001))

	require.True(t, found, "CUTOVER starts the reverse stream as a task: %+v", tasks)
	res, err := i.Stop(ctx, reverse)
	require.NoError(t, err)
	require.Equal(t, pgdog.Stopped, res)

	// A CUTOVER of the stopped stream (a rolled-back reverse's, arriving late) is refused
	// and swaps nothing: finalize's STOP_TASK, retried until it succeeds, rests on this
	// (machine/cutover's persistent).
	err = i.Cutover(ctx, reverse)
	require.Error(t, err, "CUTOVER of a stopped task")
	t.Logf("CUTOVER of the stopped stream %d: %v", reverse, err)
	c3 := clientConn(t, p, "app")
	_, err = c3.Exec(ctx, "INSERT INTO orders (id, v) VALUES (1002, 'after the late CUTOVER')")
	require.NoError(t, err, p.LogTail())
	require.Equal(t, []int{int(pghash.ShardOfInt8(1002, 2))}, holders(t, srv, dst, 1002), "the refused CUTOVER left app on the destination")
	require.Empty(t, holders(t, srv, src, 1002))
}

// waitTask waits until root task id shows inner status want.
func waitTask(t *testing.T, i *pgdog.Instance, p *pgdogtest.Instance, id int64, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tasks, err := i.Tasks(context.Background())
		require.NoError(t, err)
		for _, tk := range tasks {
			if tk.ID == id {
				if tk.InnerStatus == want {
					return
				}
				require.False(t, strings.HasPrefix(tk.Status, "failed") || strings.HasPrefix(tk.Status, "panicked"), "task %d: %+v\n%s", id, tk, p.LogTail())
			}
		}
		require.True(t, time.Now().Before(deadline), "task %d never %s: %+v\n%s", id, want, tasks, p.LogTail())
		time.Sleep(100 * time.Millisecond)
	}
}

// pgdogRig is the router suite's rig for a real PgDog over databases of a real Postgres.
type pgdogRig struct {
	t   *testing.T
	srv *pgtest.Server
	dbs []string
	p   *pgdogtest.Instance
	i   *pgdog.Instance
}

func (r *pgdogRig) Instance() adapters.RouterInstance { return r.i }
func (r *pgdogRig) Database() string                  { return "app" }
func (r *pgdogRig) Backends() int                     { return len(r.dbs) }
func (r *pgdogRig) Files(t conformance.TB, g uint64, backends []int) render.Files {
	var dbs []string
	for _, b := range backends {
		dbs = append(dbs, r.dbs[b])
	}
	return renderFiles(r.t, realRecord(r.srv, g, dbs...))
}
func (r *pgdogRig) BadFiles(t conformance.TB, g uint64) render.Files {
	fs, err := render.NewFiles(render.File{Name: render.PgDogConfigFile, Data: []byte("[[databases]]\nname = \"app\"\nshard = \"zero\"\n")})
	require.NoError(t, err)
	return fs
}
func (r *pgdogRig) Write(t conformance.TB, key int64) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgconnect(ctx, r.p)
		if err != nil {
			ch <- err
			return
		}
		defer c.Close(context.Background())
		_, err = c.Exec(ctx, "INSERT INTO orders (id, v) VALUES ("+strconv.FormatInt(key, 10)+", 'x')")
		ch <- err
	}()
	return ch
}
func (r *pgdogRig) Holders(t conformance.TB, key int64) []int { return holders(r.t, r.srv, r.dbs, key) }
func (r *pgdogRig) Settle(conformance.TB)                     { time.Sleep(50 * time.Millisecond) }
func (r *pgdogRig) Restart(t conformance.TB) {
	r.p.Restart(r.t)
	waitAdmin(r.t, r.i, r.p)
}

// TestRealPgDogRouterSuite runs the router contract (conformance.RouterCases) against a
// real PgDog.
func TestRealPgDogRouterSuite(t *testing.T) {
	srv := realServer(t)
	conformance.RunRouterSuite(t, conformance.RouterHarness{
		Route: func(key int64, n int) int { return int(pghash.ShardOfInt8(key, uint64(n))) },
		Open: func(tb conformance.TB) conformance.RouterRig {
			st := tb.(*testing.T) // the suite's subtest: its instance stops when it ends
			dbs := shards(st, srv, "suite", 3, true)
			p, i := startPgDog(st, realRecord(srv, 1, dbs[0], dbs[1]))
			return &pgdogRig{t: st, srv: srv, dbs: dbs, p: p, i: i}
		},
	})
}

// pgconnect opens a client connection to PgDog as app on database app, in the simple
// protocol.
func pgconnect(ctx context.Context, p *pgdogtest.Instance) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(p.DSN("app", "app-secret", "app"))
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}
