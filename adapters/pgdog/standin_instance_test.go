package pgdog_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// The tests named TestStandIn... run the adapter against standIn, a protocol-level stand-in
// for PgDog's admin database (see standin_test.go) that replays what a real PgDog answered
// (testdata/transcript*.json): they show that the adapter handles the replies PgDog gave,
// for the sequences the stand-in's state models; the TestRealPgDog... tests run the same
// adapter against a real PgDog.

const adminPassword = "admin-secret"

func startStandIn(t *testing.T, dir string) *standIn {
	t.Helper()
	s, err := newStandIn(dir, adminPassword)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		// What the stand-in answered with "no recording holds this" and the test did not
		// take as the answer it expected: the test relied on a reply PgDog never gave.
		if u := s.TakeUnrecorded(); len(u) > 0 {
			t.Errorf("the stand-in was asked what no recorded transcript holds:\n  %s", strings.Join(u, "\n  "))
		}
	})
	return s
}

func newInstance(t *testing.T, s *standIn, dir string) *pgdog.Instance {
	t.Helper()
	i, err := pgdog.New(pgdog.Config{ID: "pgdog-1", Admin: s.DSN(), Dir: dir, Database: "app"})
	require.NoError(t, err)
	t.Cleanup(func() { i.Close() })
	return i
}

var testCreds = render.Credentials{
	Users:       []render.User{{Name: "app", Password: "app-secret"}},
	SchemaAdmin: render.User{Name: "migrator", Password: "migrator-secret"},
	Admin:       render.Admin{Password: adminPassword},
}

func record(g uint64, hosts ...string) *shardmap.Record {
	var bs []shardmap.Backend
	for _, h := range hosts {
		bs = append(bs, shardmap.Backend{Host: h, Port: 5432, Database: "app"})
	}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"orders"}}, bs...)
	rec.Generation = g
	return rec
}

func renderFiles(t *testing.T, rec *shardmap.Record) render.Files {
	t.Helper()
	fs, err := render.PgDog(rec, testCreds, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	return fs
}

// resharding returns rec moving to a target layout over hosts, as the cutover renders it.
func resharding(rec *shardmap.Record, hosts ...string) *shardmap.Record {
	target := shardmap.Layout{Scheme: shardmap.PgHash{Key: rec.Scheme.ShardKey(), Shards: uint32(len(hosts))}}
	for i, h := range hosts {
		target.Shards = append(target.Shards, shardmap.Shard{Name: "n" + string(rune('0'+i)), Backend: shardmap.Backend{Host: h, Port: 5432, Database: "app"}, Fence: shardmap.FenceOpen})
	}
	rec.Target = &target
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: rec.Generation + 1}
	return rec
}

// applied starts a stand-in and an instance on it, and applies rec.
func applied(t *testing.T, rec *shardmap.Record) (*standIn, *pgdog.Instance) {
	t.Helper()
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	_, err := i.Apply(context.Background(), rec.Generation, renderFiles(t, rec))
	require.NoError(t, err)
	return s, i
}

func TestStandInApplyReloadsAndReadsGeneration(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()

	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.False(t, o.GenerationKnown, "an instance started without Loam's files shows no generation")

	for _, g := range []uint64{1, 2, 9} {
		files := renderFiles(t, record(g, "10.0.0.1", "10.0.0.2"))
		a, err := i.Apply(ctx, g, files)
		require.NoError(t, err)
		require.Equal(t, g, a.Generation)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, f.Name))
			require.NoError(t, err)
			require.Equal(t, f.Data, data, "Apply writes the files where the instance reads them")
		}
		o, err := i.Observe(ctx)
		require.NoError(t, err)
		require.True(t, o.GenerationKnown)
		require.Equal(t, g, o.Generation)
		require.Contains(t, o.Version, "PgDog v")
	}
	left, err := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary files are left behind")
	d, err := configmap.NewDir(dir)
	require.NoError(t, err)
	g, err := d.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(9), g, "the directory is laid out by configmap, at the last generation applied")

	pools, err := i.Pools(ctx)
	require.NoError(t, err)
	var addrs []string
	for _, p := range pools {
		if p.Database == "app" && p.User == "app" {
			addrs = append(addrs, p.Addr)
		}
	}
	require.ElementsMatch(t, []string{"10.0.0.1", "10.0.0.2"}, addrs, "SHOW POOLS shows the loaded shards")
	want, err := render.ExpectedPools(record(9, "10.0.0.1", "10.0.0.2"), testCreds, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	var got []render.PoolRow
	for _, p := range pools {
		got = append(got, p.Row())
	}
	require.ElementsMatch(t, want, got, "every pool the files produce, and no other")
}

func TestStandInApplyOfBadFilesKeepsOldConfig(t *testing.T) {
	s, i := applied(t, record(1, "10.0.0.1"))
	ctx := context.Background()
	var err error

	bad, err := render.NewFiles(render.File{Name: render.PgDogConfigFile, Data: []byte("[[databases]\n")})
	require.NoError(t, err)
	_, err = i.Apply(ctx, 2, bad)
	require.ErrorIs(t, err, pgdog.ErrExecution)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "58000", re.Code)
	require.Equal(t, "pgdog-1", re.Instance)
	require.Equal(t, "Reload", re.Op)
	var ce *pgdog.CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "FATAL", ce.Severity)

	o, err := i.Observe(ctx) // PgDog closed the connection: the adapter reconnects
	require.NoError(t, err)
	require.Equal(t, uint64(1), o.Generation, "a RELOAD that fails keeps the config that was loaded")
	require.Equal(t, 2, s.Logins())
}

// TestStandInApplyOfOlderGenerationIsRefused: an Apply that arrives after a newer one (a
// timed-out push retried late) changes neither the files nor the loaded config, and sends
// no RELOAD.
func TestStandInApplyOfOlderGenerationIsRefused(t *testing.T) {
	s, i := applied(t, record(5, "10.0.0.1"))
	ctx := context.Background()
	before := len(s.Received())
	_, err := i.Apply(ctx, 4, renderFiles(t, record(4, "10.0.0.2")))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "Apply", re.Op)
	require.Len(t, s.Received(), before, "nothing was sent")
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), o.Generation)
	require.NoError(t, i.Reload(ctx))
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), o.Generation, "the files in place are still generation 5's")
}

// TestStandInApplyOverPlainFiles: an instance first started with plain files of its own
// (before Loam managed it) takes the generation, its paths now links into the layout.
func TestStandInApplyOverPlainFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range renderFiles(t, record(1, "10.0.0.1")) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o600))
	}
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), o.Generation, "started with the plain files")
	_, err = i.Apply(ctx, 2, renderFiles(t, record(2, "10.0.0.1", "10.0.0.2")))
	require.NoError(t, err)
	target, err := os.Readlink(filepath.Join(dir, render.PgDogConfigFile))
	require.NoError(t, err)
	require.Equal(t, "..data/"+render.PgDogConfigFile, target)
}

func TestStandInApplyToAnotherDirectoryIsNotLoaded(t *testing.T) {
	started := t.TempDir()
	s := startStandIn(t, started)
	i := newInstance(t, s, t.TempDir()) // not where the instance reads its files
	_, err := i.Apply(context.Background(), 3, renderFiles(t, record(3, "10.0.0.1")))
	require.ErrorIs(t, err, pgdog.ErrNotLoaded)
	require.Contains(t, err.Error(), "--config")
}

func TestStandInPauseResumeMaintenance(t *testing.T) {
	s, i := applied(t, record(1, "10.0.0.1", "10.0.0.2"))
	ctx := context.Background()
	var err error

	require.NoError(t, i.Pause(ctx, "app"))
	// Maintenance first (it holds clients before their request is routed), then the
	// client user's pools only: the schema admin's stay open for PgDog's own resharding.
	require.Equal(t, []string{"MAINTENANCE ON app", "SHOW POOLS", "PAUSE app app"}, s.Received()[len(s.Received())-3:])
	pools, err := i.Pools(ctx)
	require.NoError(t, err)
	admin := 0
	for _, p := range pools {
		if p.Database == "app" {
			require.Equal(t, !p.SchemaAdmin, p.Paused, "pool %s/%s: paused unless it is the schema admin's", p.User, p.Database)
			if p.SchemaAdmin {
				admin++
			}
		}
	}
	require.NotZero(t, admin, "the files name a schema admin on app")
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"app"}, o.Paused)
	_, err = i.Apply(ctx, 2, renderFiles(t, record(2, "10.0.0.1", "10.0.0.2")))
	require.NoError(t, err)
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"app"}, o.Paused, "paused pools stay paused across RELOAD")
	require.NoError(t, i.Resume(ctx, "app"))
	require.Equal(t, []string{"RESUME app", "MAINTENANCE OFF app"}, s.Received()[len(s.Received())-2:])
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	require.Empty(t, o.Paused)

	require.NoError(t, i.Maintenance(ctx, true, "app"))
	require.NoError(t, i.Maintenance(ctx, false, ""))
	require.NoError(t, i.Pause(ctx, ""))
	o, err = i.Observe(ctx)
	require.NoError(t, err)
	require.Contains(t, o.Paused, "app", "Pause of every database pauses the client pools of each")
	require.NoError(t, i.Resume(ctx, ""))

	require.Subset(t, s.Received(), []string{"PAUSE app app", "RESUME app", "MAINTENANCE ON app", "MAINTENANCE OFF app", "MAINTENANCE ON", "MAINTENANCE OFF", "RESUME", "RELOAD"})
	require.NotContains(t, s.Received(), "PAUSE app", "never every user's pools of app")
}

// TestStandInNamesCheckedBeforeSending: PgDog lowercases the whole command, so "PAUSE App"
// pauses "app" (the stand-in does the same, shown first). The adapter refuses such names
// before anything is sent.
func TestStandInNamesCheckedBeforeSending(t *testing.T) {
	s, i := applied(t, record(1, "10.0.0.1"))
	ctx := context.Background()
	var err error

	_, err = i.Exec(ctx, "raw", "PAUSE App")
	require.NoError(t, err)
	o, err := i.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"app"}, o.Paused, "the hazard: a command naming App acted on app")
	require.NoError(t, i.Resume(ctx, "app"))

	before := len(s.Received())
	for name, call := range map[string]func() error{
		"pause upper":       func() error { return i.Pause(ctx, "App") },
		"resume space":      func() error { return i.Resume(ctx, "app x") },
		"maintenance semi":  func() error { return i.Maintenance(ctx, true, "app;") },
		"copy publication":  func() error { _, err := i.CopyData(ctx, "app", "app__reshard_1", "Pub", "slot"); return err },
		"copy slot quote":   func() error { _, err := i.CopyData(ctx, "app", "app__reshard_1", "pub", "s'lot"); return err },
		"copy slot missing": func() error { _, err := i.CopyData(ctx, "app", "app__reshard_1", "pub", ""); return err },
		"reshard unicode":   func() error { _, err := i.Reshard(ctx, "app", "äpp", "pub", ""); return err },
		"exec semicolon":    func() error { _, err := i.Exec(ctx, "raw", "PAUSE app; RESUME app"); return err },
	} {
		err := call()
		require.ErrorIs(t, err, pgdog.ErrName, name)
		var re *adapters.RouterError
		require.ErrorAs(t, err, &re, name)
	}
	require.Len(t, s.Received(), before, "nothing was sent for a refused name")
}

func TestStandInSyntaxErrorKeepsConnection(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	_, err := i.Exec(ctx, "raw", "FROBNICATE")
	require.ErrorIs(t, err, pgdog.ErrSyntax)
	require.NotErrorIs(t, err, pgdog.ErrExecution)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "08P01", re.Code)
	_, err = i.Settings(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Logins(), "a non-fatal error keeps the admin connection")
}

func TestStandInSettings(t *testing.T) {
	_, i := applied(t, record(1, "10.0.0.1"))
	st, err := i.Settings(context.Background())
	require.NoError(t, err)
	v, ok := st.Get("cutover_save_config")
	require.True(t, ok)
	require.Equal(t, "false", v, "the rendered [general] value, as loaded")
	_, ok = st.Get("databases")
	require.False(t, ok, "SHOW CONFIG shows no topology")
}

// TestStandInCopyDataCutoverStop walks the resharding commands a cutover issues on its
// designated instance, as far as the recordings hold them.
func TestStandInCopyDataCutoverStop(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	rec := resharding(record(4, "10.0.0.1", "10.0.0.2"), "10.1.0.1", "10.1.0.2", "10.1.0.3")
	_, err := i.Apply(ctx, 4, renderFiles(t, rec))
	require.NoError(t, err)
	dst := render.ReshardDatabase("app", 4)

	started, err := i.StartCopyData(ctx, "app", dst, "loam_pub", "loam_app_4")
	require.NoError(t, err)
	require.Equal(t, "loam_app_4", started.Slot)
	task := started.Task
	require.Equal(t, int64(0), task, "a freshly started PgDog's first task is 0 (recorded)")

	tasks, err := i.Tasks(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "only root tasks; subtasks (NULL id) are left out")
	require.Equal(t, task, tasks[0].ID)
	require.Equal(t, "syncing schema", tasks[0].InnerStatus)
	require.Equal(t, "reshard app -> "+dst, tasks[0].Kind, "the type column is PgDog's description of the task (recorded), not a kind")
	rows, err := i.TaskRows(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.False(t, rows[1].Root)

	_, ok, err := i.SlotLag(ctx, "loam_app_4", 2)
	require.NoError(t, err)
	require.False(t, ok, "no slot listed before the task replicates (recorded)")

	err = i.Cutover(ctx, task)
	require.ErrorIs(t, err, pgdog.ErrExecution, "CUTOVER of a task that is not replicating fails")
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "58000", re.Code)
	require.Contains(t, err.Error(), "task is not a replication task")

	lag := int64(4096)
	s.SetTask(task, "running", "replicating", &lag)
	got, ok, err := i.SlotLag(ctx, "loam_app_4", 2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, lag, got)
	_, ok, err = i.SlotLag(ctx, "loam_app_4", 3)
	require.NoError(t, err)
	require.False(t, ok, "two source shards, two slots listed: a third shard's stream is not there")
	_, ok, err = i.SlotLag(ctx, "other", 2)
	require.NoError(t, err)
	require.False(t, ok)

	tr, err := recorded()
	require.NoError(t, err)
	if len(tr.byLabel("cutover")) == 0 {
		// No PgDog recorded a CUTOVER that took (COPY_DATA needs Postgres 16+): the
		// stand-in does not make one up.
		err = i.Cutover(ctx, task)
		require.ErrorContains(t, err, "no recorded PgDog reply holds \"CUTOVER 0\"")
		require.Len(t, s.TakeUnrecorded(), 1)
	} else {
		require.NoError(t, i.Cutover(ctx, task))
		routing := s.Routing()
		require.Equal(t, []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}, routing["app"], "CUTOVER swapped the names in memory")
		tasks, err = i.Tasks(ctx)
		require.NoError(t, err)
		require.Len(t, tasks, 2)
		reverse := tasks[0] // newest first (recorded)
		require.Equal(t, task, tasks[1].ID)
		require.Equal(t, "finished", tasks[1].Status)
		require.Equal(t, "replicating", reverse.InnerStatus)
		res, err := i.Stop(ctx, reverse.ID)
		require.NoError(t, err)
		require.Equal(t, pgdog.Stopped, res)
	}

	res, err := i.Stop(ctx, 999)
	require.NoError(t, err)
	require.Equal(t, pgdog.TaskNotFound, res)
	require.NoError(t, i.StopTask(ctx, 999), "a task that is gone is not an error for the cutover")
	require.Subset(t, s.Received(), []string{"COPY_DATA app " + dst + " loam_pub loam_app_4", "CUTOVER 0", "STOP_TASK 999"})
}

// TestStandInCutoverWaitsForTheTask: PgDog's CUTOVER only requests the cutover (recorded:
// it answers OK while the task still replicates); Cutover returns once SHOW TASKS lists the
// task finished, the swap made and the reverse stream listed.
func TestStandInCutoverWaitsForTheTask(t *testing.T) {
	s, i, task := replicatingCopy(t)
	ctx := context.Background()
	require.NoError(t, i.Cutover(ctx, task))
	got := s.Received()
	at := slices.Index(got, "CUTOVER "+strconv.FormatInt(task, 10))
	require.GreaterOrEqual(t, at, 0)
	require.GreaterOrEqual(t, strings.Count(strings.Join(got[at+1:], "\n"), "SHOW TASKS"), 2, "listed in progress, then finished: %v", got[at:])
	require.Equal(t, []string{"10.1.0.1", "10.1.0.2"}, s.Routing()["app"], "swapped by the time Cutover returned")
	tasks, err := i.Tasks(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 2, "the copy and the reverse stream")
	require.Equal(t, task, tasks[1].ID, "newest first (recorded)")
	require.Equal(t, "finished", tasks[1].Status)
	require.Equal(t, "running", tasks[0].Status)
}

// TestStandInCutoverThatFailsAfterItWasAccepted: a cutover PgDog accepted and whose task
// then failed is an ErrExecution, and nothing was swapped.
func TestStandInCutoverThatFailsAfterItWasAccepted(t *testing.T) {
	s, i, task := replicatingCopy(t)
	s.FailCutover("abort timeout")
	err := i.Cutover(context.Background(), task)
	require.ErrorIs(t, err, pgdog.ErrExecution)
	require.ErrorContains(t, err, "abort timeout")
	require.Equal(t, []string{"10.0.0.1", "10.0.0.2"}, s.Routing()["app"], "no swap")
}

// replicatingCopy is a stand-in whose COPY_DATA task replicates, caught up.
func replicatingCopy(t *testing.T) (*standIn, *pgdog.Instance, int64) {
	t.Helper()
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	_, err := i.Apply(ctx, 4, renderFiles(t, resharding(record(4, "10.0.0.1", "10.0.0.2"), "10.1.0.1", "10.1.0.2")))
	require.NoError(t, err)
	started, err := i.StartCopyData(ctx, "app", render.ReshardDatabase("app", 4), "loam_pub", "loam_app_4")
	require.NoError(t, err)
	lag := int64(0)
	s.SetTask(started.Task, "running", "replicating", &lag)
	return s, i, started.Task
}

// TestStandInStopOfFailedTaskIsNotFound: PgDog answers STOP_TASK of a task that failed
// with "task not found" (recorded), which the cutover takes as a task that is gone.
func TestStandInStopOfFailedTaskIsNotFound(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	_, err := i.Apply(ctx, 4, renderFiles(t, resharding(record(4, "10.0.0.1"), "10.1.0.1")))
	require.NoError(t, err)
	started, err := i.StartCopyData(ctx, "app", render.ReshardDatabase("app", 4), "loam_pub", "loam_app_4")
	require.NoError(t, err)
	s.SetTask(started.Task, "failed: task failed: schema: backend: ERROR: 42883 function pg_get_publication_tables(text[]) does not exist", "syncing schema", nil)
	res, err := i.Stop(ctx, started.Task)
	require.NoError(t, err)
	require.Equal(t, pgdog.TaskNotFound, res)
	require.NoError(t, i.StopTask(ctx, started.Task))
}

// TestStandInRefusesWhatNoTranscriptHolds: a command no recording holds is answered with
// an error naming it, never with a reply made up, and the test that asked is told.
func TestStandInRefusesWhatNoTranscriptHolds(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	for _, cmd := range []string{"SHOW CLIENTS", "RESUME app app"} {
		_, err := i.Exec(ctx, "raw", cmd)
		require.ErrorContains(t, err, "no recorded PgDog reply holds "+strconv.Quote(cmd))
		var re *adapters.RouterError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "XX000", re.Code)
	}
	u := s.TakeUnrecorded()
	require.Len(t, u, 2)
	require.Contains(t, u[0], `SHOW CLIENTS: no recorded exchange is labelled "show clients"`)
	require.Contains(t, u[1], `"resume user db"`)
	// The check itself: a reply that differs from every recording of its label.
	tr, err := recorded()
	require.NoError(t, err)
	e := s.answer(reply{label: "show pools", rows: []row{{"paused": str("yes")}}}, "SHOW POOLS")
	require.NotNil(t, e.Error)
	require.Contains(t, e.Error.Message, "column paused")
	require.NotEmpty(t, tr.conform("show pools", Exchange{Command: "SHOW POOLS", Tag: "SHOW"}), "SHOW POOLS is tagged SHOW POOLS (recorded); SHOW CONFIG's tag is SHOW")
	require.Len(t, s.TakeUnrecorded(), 1)
}

func TestStandInCopyDataWithoutSchemaOwnerFails(t *testing.T) {
	_, i := applied(t, record(1, "10.0.0.1"))
	_, err := i.CopyData(context.Background(), "app", "app__reshard_1", "pub", "slot")
	require.ErrorIs(t, err, pgdog.ErrExecution)
	require.Contains(t, err.Error(), "schema owner")
}

func TestStandInUnreachable(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i := newInstance(t, s, dir)
	ctx := context.Background()
	require.NoError(t, i.Reload(ctx))

	s.DropConnections()
	err := i.Reload(ctx)
	require.ErrorIs(t, err, adapters.ErrUnreachable, "a connection that broke under a command: it may or may not have run")
	require.NoError(t, i.Reload(ctx), "the next command reconnects")

	s.Close()
	_, err = i.Observe(ctx)
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "pgdog-1", re.Instance)

	require.NoError(t, i.Close())
	require.ErrorIs(t, i.Reload(ctx), adapters.ErrClosed)
}

func TestStandInWrongPasswordIsNotUnreachable(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	i, err := pgdog.New(pgdog.Config{ID: "pgdog-1", Admin: "postgres://admin:wrong@" + s.ln.Addr().String() + "/admin?sslmode=disable", Dir: dir, Database: "app"})
	require.NoError(t, err)
	defer i.Close()
	err = i.Reload(context.Background())
	require.Error(t, err)
	require.NotErrorIs(t, err, adapters.ErrUnreachable, "the instance answered: the login is wrong")
	require.ErrorIs(t, err, pgdog.ErrLogin)
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "28000", re.Code, "PgDog's code for a wrong admin password (recorded), not Postgres's 28P01")
}

// TestStandInRejectsExtendedProtocol: a pgx connection in its default (extended protocol)
// mode cannot talk to the admin database; the adapter, which sends only simple Query
// messages, can.
func TestStandInRejectsExtendedProtocol(t *testing.T) {
	dir := t.TempDir()
	s := startStandIn(t, dir)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SHOW POOLS") // pgx uses the extended protocol for queries
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	require.ErrorContains(t, err, "simple protocol supported only")
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "58000", pe.Code, "PgDog refuses it as a failed command: FATAL 58000 (recorded)")
	require.True(t, conn.IsClosed(), "and closes the connection")

	i := newInstance(t, s, dir)
	_, err = i.Pools(ctx)
	require.NoError(t, err)
}
