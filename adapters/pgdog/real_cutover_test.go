package pgdog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/loadcheck"
	"loam.dev/router/conformance/pgdogtest"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
	"loam.dev/router/refrouter"
)

// The fenced cutover end to end through three real PgDog instances (§6.4): the cutover
// machine, run by the driver, moves database app from two source shards (databases on one
// Postgres) to three destination shards (databases on another) with PgDog's own COPY_DATA,
// CUTOVER and STOP_TASK on pgdog-1, while eight clients write through the three instances.
// pgdog-3 is cut off from the controller (every admin call to it fails as unreachable) but
// its clients keep writing: it never pauses and never reloads, and the fence on the source
// must refuse its writes. adapters/postgres fences the source.

const (
	pgCutInstances = 3
	pgCutWorkers   = 8
	pgCutSrc       = 2
	pgCutDst       = 3
)

// pgDst is the destination shards' Postgres: the fence (ALTER ROLE ... NOLOGIN) holds for
// a whole server, so the machine refuses source and destination on one.
var pgDst = pgtest.NewShared(pgtest.WithSettings(map[string]string{"wal_level": "logical", "max_replication_slots": "32", "max_wal_senders": "32", "max_connections": "200"}))

var dstRolesOnce sync.Once

// cutServers returns the source and destination servers, skipping without PgDog or on a
// Postgres older than 16 (PgDog's schema sync needs pg_get_publication_tables(text[])).
func cutServers(t *testing.T) (src, dst *pgtest.Server) {
	t.Helper()
	src = realServer(t)
	if v := src.QueryString(t, "postgres", "SHOW server_version_num"); v < "160000" {
		t.Skipf("skipped: needs postgres 16+ for PgDog's COPY_DATA (server_version_num %s)", v)
	}
	dst = pgDst.Get(t)
	dstRolesOnce.Do(func() {
		dst.Exec(t, "postgres", "CREATE ROLE migrator LOGIN SUPERUSER REPLICATION PASSWORD 'migrator-secret'")
	})
	return src, dst
}

// pgCutRun is one cutover through real PgDog instances and what happened in it.
type pgCutRun struct {
	t        *testing.T
	scenario cutScenario
	src, dst *pgtest.Server
	role     string
	srcDBs   []string
	dstDBs   []string
	creds    render.Credentials
	rec      *shardmap.Record // generation 2, resharding: what the cutover starts from
	store    *memstore.Store
	dbRef    adapters.DBRef
	procs    map[string]*pgdogtest.Instance
	insts    map[string]*pgdog.Instance
	ids      []string
	backends map[string]*postgres.Backend
	logs     bytes.Buffer

	mu        sync.Mutex
	fencedAt  time.Time // the first FenceWrites of a source shard returned
	unfenceAt time.Time // the first UnfenceWrites of a source shard was called
	resumed   map[string]bool
	cutovers  int
	pastPNR   chan struct{}
	timeline  *driver.Timeline
}

type cutScenario int

const (
	cutForward  cutScenario = iota // the cutover finalizes
	cutRollback                    // CUTOVER fails on pgdog-1 (injected, before it is sent)
	cutReverse                     // Reverse once every reachable instance resumed after the CUTOVER
)

func (s cutScenario) String() string { return [...]string{"forward", "rollback", "reverse"}[s] }

// newPgCutRun makes the shards (orders of the load in table t, published on the source),
// stores generation 2 resharding towards the destination and starts the instances on its
// files.
func newPgCutRun(t *testing.T, src, dst *pgtest.Server, sc cutScenario) *pgCutRun {
	t.Helper()
	id := rigSeq.Add(1)
	r := &pgCutRun{t: t, scenario: sc, src: src, dst: dst, role: fmt.Sprintf("cut%d", id), procs: map[string]*pgdogtest.Instance{},
		insts: map[string]*pgdog.Instance{}, backends: map[string]*postgres.Backend{}, resumed: map[string]bool{}, pastPNR: make(chan struct{})}
	for _, s := range []*pgtest.Server{src, dst} {
		s.Exec(t, "postgres", "CREATE ROLE "+r.role+" LOGIN PASSWORD 'pw'")
	}
	for i := range pgCutSrc {
		name := fmt.Sprintf("%s_src%d", r.role, i)
		src.CreateDatabase(t, name)
		src.Exec(t, name, "CREATE TABLE t (id bigint PRIMARY KEY, worker int, seq bigint, router text); ALTER TABLE t OWNER TO migrator; GRANT ALL ON t TO "+r.role+"; CREATE PUBLICATION loam_pub FOR TABLE t")
		r.srcDBs = append(r.srcDBs, name)
	}
	for j := range pgCutDst {
		name := fmt.Sprintf("%s_dst%d", r.role, j)
		dst.CreateDatabase(t, name) // PgDog's schema sync creates t (pg_dump of the source)
		dst.Exec(t, name, "GRANT ALL ON SCHEMA public TO "+r.role)
		r.dstDBs = append(r.dstDBs, name)
	}
	dropSlotsAtEnd(t, src, r.srcDBs...)
	dropSlotsAtEnd(t, dst, r.dstDBs...) // the reverse stream's
	key := shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}
	backs := func(s *pgtest.Server, dbs []string) []shardmap.Backend {
		var out []shardmap.Backend
		for _, d := range dbs {
			out = append(out, shardmap.Backend{Host: "127.0.0.1", Port: uint16(s.Port), Database: d})
		}
		return out
	}
	r.rec = shardmap.NewPgHash("app", key, backs(src, r.srcDBs)...)
	target := shardmap.NewPgHash("app", key, backs(dst, r.dstDBs)...).Layout
	for j := range target.Shards {
		target.Shards[j].Name = fmt.Sprintf("n%d", j)
	}
	r.rec.Generation, r.rec.Target = 2, &target
	r.rec.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	r.creds = render.Credentials{Users: []render.User{{Name: r.role, Password: "pw"}},
		SchemaAdmin: render.User{Name: "migrator", Password: "migrator-secret"}, Admin: render.Admin{Password: adminPassword}}
	r.store = memstore.New()
	r.dbRef = adapters.DBRef{Namespace: "ns", Database: "app"}
	ctx := context.Background()
	v, err := r.store.CAS(ctx, r.dbRef, 0, r.rec)
	require.NoError(t, err)
	r.rec.Version = v

	files := r.render(r.rec)
	for n := 1; n <= pgCutInstances; n++ {
		id := fmt.Sprintf("pgdog-%d", n)
		p := pgdogtest.Start(t, r.rec.Generation, files)
		i, err := pgdog.New(pgdog.Config{ID: id, Admin: p.AdminDSN(adminPassword), Dir: p.Dir, Database: "app"})
		require.NoError(t, err)
		t.Cleanup(func() { i.Close() })
		waitAdmin(t, i, p)
		r.ids = append(r.ids, id)
		r.procs[id], r.insts[id] = p, i
	}
	for _, l := range []shardmap.Layout{r.rec.Layout, target} {
		for _, s := range l.Shards {
			b, err := postgres.Open(ctx, r.server(s.Backend).DSN(s.Backend.Database), postgres.Options{})
			require.NoError(t, err)
			t.Cleanup(b.Close)
			r.backends[driver.BackendKey(s.Backend)] = b
		}
	}
	return r
}

func (r *pgCutRun) render(rec *shardmap.Record) render.Files {
	fs, err := render.PgDog(rec, r.creds, pgCutOptions)
	require.NoError(r.t, err)
	return fs
}

// pgCutOptions: pgdog-3's writes to the fenced source wait for a login that fails until
// checkout_timeout refuses them; at PgDog's default, 5 s, every one started inside the
// fence window (2 to 4 s) ended after it, and the stale check had nothing to check.
var pgCutOptions = render.PgDogOptions{TLS: render.TLS{Insecure: true}, CheckoutTimeout: 500 * time.Millisecond}

func (r *pgCutRun) server(b shardmap.Backend) *pgtest.Server {
	if int(b.Port) == r.src.Port {
		return r.src
	}
	return r.dst
}

// WriteFiles is the shared volume: every instance's directory gets the files (pgdog-3's
// too; it reads them when it restarts).
func (r *pgCutRun) WriteFiles(ctx context.Context, g uint64, files render.Files) error {
	for _, id := range r.ids {
		d, err := configmap.NewDir(r.procs[id].Dir)
		if err != nil {
			return err
		}
		if err := d.WriteFiles(ctx, g, files); err != nil {
			return err
		}
	}
	return nil
}

// errCutOff is what the controller gets from pgdog-3.
var errCutOff = fmt.Errorf("pgdog-3 is cut off from the controller: %w", adapters.ErrUnreachable)

// cutInstance is the controller's view of one instance: pgdog-3's calls all fail; the
// others' RESUMEs after the CUTOVER are noted for the reverse scenario.
type cutInstance struct {
	id string
	r  *pgCutRun
}

func (c cutInstance) ID() string { return c.id }
func (c cutInstance) Apply(ctx context.Context, g uint64, fs render.Files) (adapters.Applied, error) {
	if c.id == "pgdog-3" {
		return adapters.Applied{}, errCutOff
	}
	return c.r.insts[c.id].Apply(ctx, g, fs)
}
func (c cutInstance) Observe(ctx context.Context) (adapters.Observed, error) {
	if c.id == "pgdog-3" {
		return adapters.Observed{}, errCutOff
	}
	return c.r.insts[c.id].Observe(ctx)
}
func (c cutInstance) Pause(ctx context.Context, db string) error {
	if c.id == "pgdog-3" {
		return errCutOff
	}
	return c.r.insts[c.id].Pause(ctx, db)
}
func (c cutInstance) Resume(ctx context.Context, db string) error {
	if c.id == "pgdog-3" {
		return errCutOff
	}
	err := c.r.insts[c.id].Resume(ctx, db)
	if err == nil {
		c.r.mu.Lock()
		if c.r.cutovers > 0 && c.r.scenario == cutReverse && !c.r.resumed[c.id] {
			c.r.resumed[c.id] = true
			if len(c.r.resumed) == pgCutInstances-1 {
				close(c.r.pastPNR)
			}
		}
		c.r.mu.Unlock()
	}
	return err
}

// cutResharder is pgdog-1's admin connection, with the rollback scenario's CUTOVER failure.
type cutResharder struct {
	*pgdog.Instance
	r *pgCutRun
}

func (c cutResharder) Cutover(ctx context.Context, task int64) error {
	if c.r.scenario == cutRollback {
		// After a while, as a CUTOVER whose answer was lost would: failing at once, the
		// three tries end within milliseconds of the fence, and no write of pgdog-3's
		// clients (one at a time each) falls inside the fence window the check reads. A
		// refused write takes checkout_timeout (500 ms) and a reconnect: at 300 ms a try,
		// none fell inside (2026-12-03, PgDog 9918e963).
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		return fmt.Errorf("CUTOVER %d failed (injected by the rollback scenario, not sent)", task)
	}
	err := c.Instance.Cutover(ctx, task)
	if err == nil {
		c.r.mu.Lock()
		c.r.cutovers++
		c.r.mu.Unlock()
	}
	return err
}

// cutShard notes when the fence of the source took effect and was released.
type cutShard struct {
	adapters.ShardBackend
	source bool
	r      *pgCutRun
}

func (s cutShard) FenceWrites(ctx context.Context, role string) error {
	err := s.ShardBackend.FenceWrites(ctx, role)
	if err == nil && s.source {
		s.r.mu.Lock()
		if s.r.fencedAt.IsZero() {
			s.r.fencedAt = time.Now()
		}
		s.r.mu.Unlock()
	}
	return err
}

// AwaitSlotDrain is the Postgres backend's: the drain before CUTOVER.
func (s cutShard) AwaitSlotDrain(ctx context.Context, slot string) error {
	d, ok := s.ShardBackend.(adapters.SlotDrainer)
	if !ok {
		return fmt.Errorf("%T cannot drain", s.ShardBackend)
	}
	return d.AwaitSlotDrain(ctx, slot)
}

func (s cutShard) UnfenceWrites(ctx context.Context, role string) error {
	called := time.Now()
	err := s.ShardBackend.UnfenceWrites(ctx, role)
	if err == nil && s.source {
		s.r.mu.Lock()
		if s.r.unfenceAt.IsZero() && !s.r.fencedAt.IsZero() {
			s.r.unfenceAt = called
		}
		s.r.mu.Unlock()
	}
	return err
}

// pgLoad writes rows through the instances, one connection per worker, until stopped.
type pgLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes []refrouter.Write
}

func (r *pgCutRun) startLoad(ctx context.Context) *pgLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &pgLoad{cancel: cancel}
	for w := range pgCutWorkers {
		id := r.ids[w%len(r.ids)]
		p := r.procs[id]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var c *pgx.Conn
			defer func() {
				if c != nil {
					c.Close(context.Background())
				}
			}()
			for seq := int64(1); ctx.Err() == nil; seq++ {
				key := int64(w+1)<<32 | seq
				start := time.Now()
				err := func() error {
					if c == nil {
						cfg, err := pgx.ParseConfig(p.DSN(r.role, "pw", "app"))
						if err != nil {
							return err
						}
						cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
						if c, err = pgx.ConnectConfig(ctx, cfg); err != nil {
							c = nil
							return err
						}
					}
					_, err := c.Exec(ctx, "INSERT INTO t (id, worker, seq, router) VALUES ("+strconv.FormatInt(key, 10)+", "+strconv.Itoa(w)+", "+strconv.FormatInt(seq, 10)+", '"+id+"')")
					if err != nil {
						c.Close(context.Background())
						c = nil
					}
					return err
				}()
				l.mu.Lock()
				l.writes = append(l.writes, refrouter.Write{Worker: w, Seq: seq, Key: key, Router: id, Start: start, Latency: time.Since(start), Err: err})
				l.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond) // a refused login is not retried in a hot loop
				}
			}
		}()
	}
	return l
}

func (l *pgLoad) stop() []refrouter.Write {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.writes)
}

// pgCutOutcome is what a run measured.
type pgCutOutcome struct {
	done                  cutover.Done
	writes                []refrouter.Write
	pause                 driver.PauseReport
	acked, refused, other int
	errs                  map[string]int // the errors of refused writes, by text, for the log
}

// drive runs the load, the cutover and the scenario's decision.
func (r *pgCutRun) drive(steady time.Duration) pgCutOutcome {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	load := r.startLoad(ctx)
	time.Sleep(steady)

	insts, backs := map[string]adapters.RouterInstance{}, map[string]adapters.ShardBackend{}
	for _, id := range r.ids {
		insts[id] = cutInstance{id, r}
	}
	for _, s := range r.rec.Shards {
		k := driver.BackendKey(s.Backend)
		backs[k] = cutShard{r.backends[k], true, r}
	}
	for _, s := range r.rec.Target.Shards {
		k := driver.BackendKey(s.Backend)
		backs[k] = cutShard{r.backends[k], false, r}
	}
	done := make(chan cutover.Done, 1)
	exec := &driver.CutoverExecutor{DB: r.dbRef, Store: r.store, Target: r, Render: func(rec *shardmap.Record) (render.Files, error) {
		return render.PgDog(rec, r.creds, pgCutOptions)
	},
		Instance:  driver.Lookup(insts),
		Resharder: driver.Lookup(map[string]adapters.Resharder{"pgdog-1": cutResharder{r.insts["pgdog-1"], r}}),
		Backend:   driver.Lookup(backs),
		OnDone:    func(d cutover.Done) { done <- d }, Logger: slog.New(slog.NewTextHandler(&r.logs, nil))}
	// ReverseSettle: a reverse reloads the instances before it opens the old layout, and waits
	// checkout_timeout between, so that the clients d's reverse CUTOVER released, routed by
	// the new layout, which d's RELOAD retries on the old one with the new one's shard
	// index, are refused by the fence (cutover.Options.ReverseSettle).
	opts := cutover.Options{LagThreshold: 1 << 20, PollEvery: 100, RetryAfter: 100, Attempts: 3, InstanceAttempts: 1, Grace: 200, CatchUpDeadline: 120_000,
		ReverseSettle: pgCutOptions.CheckoutTimeout.Milliseconds() + 100}
	if r.scenario == cutForward {
		opts.FinalizeAfter = 500
	}
	start := cutover.Start{Record: r.rec.Clone(), Plan: cutover.Plan{Designated: "pgdog-1", Instances: r.ids, Role: r.role, Publication: "loam_pub", Options: opts}}
	timeline := &driver.Timeline{}
	r.timeline = timeline
	cfg := driver.Config[cutover.Input]{ID: "ns/app", Store: r.store, Logger: exec.Logger, Trace: machine.Discard, Timeline: timeline}
	if r.scenario == cutReverse {
		inputs := make(chan cutover.Input)
		cfg.Inputs = inputs
		go func() {
			defer close(inputs)
			select {
			case <-r.pastPNR:
				inputs <- cutover.Reverse{}
			case <-ctx.Done():
			}
		}()
	}
	err := driver.Run(ctx, driver.Cutover(exec), cfg, cutover.Input(start))
	require.NoError(t, err, "the cutover driver\n%s\n%s", r.logs.String(), r.procs["pgdog-1"].LogTail())
	var o pgCutOutcome
	o.pause, _ = driver.CutoverPause(timeline.Spans())
	select {
	case o.done = <-done:
	default:
		t.Fatalf("the cutover ended without Done\n%s", r.logs.String())
	}
	time.Sleep(steady / 2) // writes after the cutover, by the generation in force
	o.writes = load.stop()
	o.errs = map[string]int{}
	for _, w := range o.writes {
		switch {
		case w.Acked():
			o.acked++
		case errors.Is(w.Err, context.Canceled) || ctx.Err() != nil && errors.Is(w.Err, context.DeadlineExceeded):
		default:
			o.refused++
			o.errs[w.Router+": "+w.Err.Error()]++
		}
	}
	t.Logf("%s: outcome %s (%s); pause window %v; writes acknowledged %d, refused %d", r.scenario, o.done.Outcome, o.done.Reason,
		o.pause.Window.Round(time.Microsecond), o.acked, o.refused)
	for e, n := range o.errs {
		t.Logf("  refused %4d× %s", n, e)
	}
	return o
}

// exactlyOnce: every acknowledged write is stored exactly once among the n shards, on the
// one its key hashes to, and every stored row comes from a write of the load (a write PgDog
// answered with an error may still have committed, so a refused write's row is not an
// error here). It returns how many acknowledged writes are missing (lost).
func exactlyOnce(t *testing.T, where map[int64][]int, writes []refrouter.Write, n int, what string) int {
	t.Helper()
	lost, err := loadcheck.ExactlyOnce(where, writes, n, nil)
	require.NoError(t, err, what)
	return lost
}

// logMissing logs, for the acknowledged writes missing from where, which instance took
// them, when (from the start of the fence), and whether the other layout's shards (srv,
// dbs) hold them.
func (r *pgCutRun) logMissing(t *testing.T, o pgCutOutcome, where map[int64][]int, srv *pgtest.Server, dbs []string) {
	t.Helper()
	otherWhere, _ := loadcheck.Stored(t, srv, dbs)
	r.mu.Lock()
	fenced := r.fencedAt
	r.mu.Unlock()
	n := 0
	for _, w := range o.writes {
		if !w.Acked() || len(where[w.Key]) > 0 {
			continue
		}
		if n++; n <= 20 {
			t.Logf("missing: key %d by %s, started %v after the first fence, ended %v; on the other layout's shards %v", w.Key, w.Router, w.Start.Sub(fenced).Round(time.Millisecond), (w.Start.Sub(fenced) + w.Latency).Round(time.Millisecond), otherWhere[w.Key])
		}
	}
	if n > 0 {
		t.Logf("%d acknowledged writes missing\n%s", n, r.logs.String())
	}
}

// logMisplaced logs, for the rows where (over the n shards of the layout in force) holds
// on another shard than their key's hash, the write's instance and its time from the first
// fence, both hashes, whether the other layout's shards (srv, dbs) hold it, the same
// worker's writes around it, and the driver's commands on that clock.
func (r *pgCutRun) logMisplaced(t *testing.T, o pgCutOutcome, where map[int64][]int, n int, srv *pgtest.Server, dbs []string) {
	t.Helper()
	r.mu.Lock()
	fenced := r.fencedAt
	r.mu.Unlock()
	at := func(x time.Time) time.Duration { return x.Sub(fenced).Round(time.Millisecond) }
	misplaced := func(k int64) bool {
		got := where[k]
		return len(got) > 0 && (len(got) != 1 || got[0] != int(pghash.ShardOfInt8(k, uint64(n))))
	}
	var otherWhere map[int64][]int
	bad := 0
	for _, w := range o.writes {
		if !misplaced(w.Key) {
			continue
		}
		if otherWhere == nil {
			otherWhere, _ = loadcheck.Stored(t, srv, dbs)
		}
		bad++
		t.Logf("misplaced: key %d (worker %d, seq %d) by %s, %v to %v after the first fence, err %v: on shards %v, hash %d of %d and %d of %d; on the other layout's shards %v",
			w.Key, w.Worker, w.Seq, w.Router, at(w.Start), at(w.Start.Add(w.Latency)), w.Err, where[w.Key], pghash.ShardOfInt8(w.Key, uint64(n)), n,
			pghash.ShardOfInt8(w.Key, uint64(len(dbs))), len(dbs), otherWhere[w.Key])
		for _, v := range o.writes {
			if v.Worker == w.Worker && v.Seq != w.Seq && v.Seq >= w.Seq-2 && v.Seq <= w.Seq+2 {
				t.Logf("  seq %d: %v to %v, err %v, on shards %v, other layout %v", v.Seq, at(v.Start), at(v.Start.Add(v.Latency)), v.Err, where[v.Key], otherWhere[v.Key])
			}
		}
	}
	if bad == 0 {
		return
	}
	for _, sp := range r.timeline.Spans() {
		if sp.Kind == driver.SpanExec {
			t.Logf("  %v to %v %s %s", at(sp.Start), at(sp.End), sp.What, sp.Result)
		}
	}
}

// failed: a write PgDog answered with an error.
func failed(w refrouter.Write) bool { return !w.Acked() }

// checkStale: pgdog-3, cut off from the controller, kept routing to the source. Every write
// of its clients that started after the source's fence took effect and ended before its
// release was refused, and did not land on the source; and some were (not vacuous).
func (r *pgCutRun) checkStale(t *testing.T, o pgCutOutcome, srcWhere map[int64][]int, srcBy map[int64]string) {
	t.Helper()
	r.mu.Lock()
	from, until := r.fencedAt, r.unfenceAt
	r.mu.Unlock()
	inside, _, err := loadcheck.Stale(o.writes, "pgdog-3", from, until, srcWhere, srcBy, failed)
	require.NoError(t, err, "the fence must refuse pgdog-3's writes")
	require.NotZero(t, inside, "pgdog-3's clients wrote inside the fence window")
	t.Logf("pgdog-3: %d writes inside the fence window, all refused", inside)
}

// probe asks instance id where it routes key: an upsert of the key's row that returns the
// database it ran on. It is how the clients' writes are routed, so it is the routing the
// design's Q306 is about.
func (r *pgCutRun) probe(t *testing.T, id string, key int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(r.procs[id].DSN(r.role, "pw", "app"))
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	c, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err, r.procs[id].LogTail())
	defer c.Close(context.Background())
	var db string
	k := strconv.FormatInt(key, 10)
	require.NoError(t, c.QueryRow(ctx, "INSERT INTO t (id, worker, seq, router) VALUES ("+k+", -1, 0, 'probe') ON CONFLICT (id) DO UPDATE SET seq = t.seq + 1 RETURNING current_database()").Scan(&db),
		"probe of key %d through %s\n%s", key, id, r.procs[id].LogTail())
	return db
}

// checkSameRouting is Q306: each of keys is routed by every instance in ids to the same
// shard, the one layout dbs routes it to.
func (r *pgCutRun) checkSameRouting(t *testing.T, ids []string, dbs []string, keys []int64) {
	t.Helper()
	for _, k := range keys {
		want := dbs[pghash.ShardOfInt8(k, uint64(len(dbs)))]
		for _, id := range ids {
			require.Equal(t, want, r.probe(t, id, k), "Q306: %s routes key %d elsewhere than the layout in force", id, k)
		}
	}
}

// probeKeys are keys no worker writes (workers use (worker+1)<<32 | seq), spread over the
// shards.
func probeKeys() []int64 {
	var ks []int64
	for j := range int64(24) {
		ks = append(ks, 1<<50+j*7919)
	}
	return ks
}

func TestRealPgDogFencedCutoverUnderLoad(t *testing.T) {
	src, dst := cutServers(t)
	t.Run("forward", func(t *testing.T) {
		r := newPgCutRun(t, src, dst, cutForward)
		o := r.drive(2 * time.Second)
		require.Equal(t, cutover.Finalized, o.done.Outcome, "%s\n%s\n%s", o.done.Reason, r.logs.String(), r.procs["pgdog-1"].LogTail())
		require.Equal(t, []string{"pgdog-3"}, o.done.Missed, "pgdog-3 could not be paused")
		require.Equal(t, []string{"pgdog-3"}, o.done.Lagging, "pgdog-3 could not be reloaded")
		dstWhere, _ := loadcheck.Stored(t, dst, r.dstDBs)
		r.logMissing(t, o, dstWhere, src, r.srcDBs)
		require.Zero(t, exactlyOnce(t, dstWhere, o.writes, pgCutDst, "destination"), "acknowledged writes lost")
		srcWhere, srcBy := loadcheck.Stored(t, src, r.srcDBs)
		r.checkStale(t, o, srcWhere, srcBy)
		for _, w := range o.writes {
			if w.Router != "pgdog-3" && w.Err != nil && !errors.Is(w.Err, context.Canceled) {
				t.Logf("%s's write %d failed: %v", w.Router, w.Key, w.Err)
			}
		}
		rec, err := r.store.Read(context.Background(), r.dbRef)
		require.NoError(t, err)
		require.Equal(t, shardmap.Serving, rec.State.Phase)
		require.Equal(t, r.rec.Target.Shards, rec.Shards, "the record serves the new layout")

		// Q306: pgdog-1 swapped its routing at CUTOVER, pgdog-2 reloaded generation 3;
		// both route every key to the same destination shard. The finalized generation's
		// files are ConfigPush's to write (Done names it; the machine writes none at
		// finalize): written here as it would, pgdog-3 restarts on them and routes there
		// too.
		r.checkSameRouting(t, []string{"pgdog-1", "pgdog-2"}, r.dstDBs, probeKeys())
		require.Equal(t, rec.Generation, o.done.Generation, "Done names the generation stored")
		require.NoError(t, r.WriteFiles(context.Background(), rec.Generation, r.render(rec)))
		r.procs["pgdog-3"].Restart(t)
		waitAdmin(t, r.insts["pgdog-3"], r.procs["pgdog-3"])
		obs, err := r.insts["pgdog-3"].Observe(context.Background())
		require.NoError(t, err)
		require.Equal(t, rec.Generation, obs.Generation, "pgdog-3 restarted on the files of the generation in force")
		r.checkSameRouting(t, r.ids, r.dstDBs, probeKeys())
	})
	t.Run("rollback", func(t *testing.T) {
		r := newPgCutRun(t, src, dst, cutRollback)
		o := r.drive(2 * time.Second)
		require.Equal(t, cutover.RolledBack, o.done.Outcome, "%s\n%s", o.done.Reason, r.logs.String())
		srcWhere, srcBy := loadcheck.Stored(t, src, r.srcDBs)
		require.Zero(t, exactlyOnce(t, srcWhere, o.writes, pgCutSrc, "source"), "acknowledged writes lost")
		r.checkStale(t, o, srcWhere, srcBy)
		rec, err := r.store.Read(context.Background(), r.dbRef)
		require.NoError(t, err)
		require.Equal(t, shardmap.Serving, rec.State.Phase)
		require.Equal(t, r.rec.Shards, rec.Shards, "the record serves the source layout again")
		r.checkSameRouting(t, r.ids, r.srcDBs, probeKeys())
		tasks, err := r.insts["pgdog-1"].Tasks(context.Background())
		require.NoError(t, err)
		for _, tk := range tasks {
			require.NotContains(t, []string{"running", "started"}, tk.Status, "the rolled-back copy is stopped: %+v", tasks)
		}
	})
	t.Run("reverse", func(t *testing.T) {
		r := newPgCutRun(t, src, dst, cutReverse)
		o := r.drive(2 * time.Second)
		require.Equal(t, cutover.Reversed, o.done.Outcome, "%s\n%s\n%s", o.done.Reason, r.logs.String(), r.procs["pgdog-1"].LogTail())
		srcWhere, _ := loadcheck.Stored(t, src, r.srcDBs)
		r.logMissing(t, o, srcWhere, dst, r.dstDBs)
		r.logMisplaced(t, o, srcWhere, pgCutSrc, dst, r.dstDBs)
		require.Zero(t, exactlyOnce(t, srcWhere, o.writes, pgCutSrc, "source after the reverse"), "acknowledged writes lost")
		rec, err := r.store.Read(context.Background(), r.dbRef)
		require.NoError(t, err)
		require.Equal(t, r.rec.Shards, rec.Shards, "the record serves the source layout again")
		r.checkSameRouting(t, []string{"pgdog-1", "pgdog-2"}, r.srcDBs, probeKeys())
	})
}

// TestRealPgDogCutoverFigures runs the forward cutover through three real PgDog instances
// LOAM_CUTOVER_RUNS times (default: skipped) and reports the pause window (the driver's:
// first PAUSE sent to the last RESUME answered), median and max, and the writes
// acknowledged, refused and lost. refrouter's TestRealCutoverFigures is the
// reference router's figure; run both in one go test (-p 1) to compare on one machine.
func TestRealPgDogCutoverFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("LOAM_CUTOVER_RUNS"))
	if runs <= 0 {
		t.Skip("set LOAM_CUTOVER_RUNS=10 to measure the cutover figures")
	}
	src, dst := cutServers(t)
	var windows []time.Duration
	acked, refused, lost, misplaced := 0, 0, 0, 0
	for n := 1; n <= runs; n++ {
		t.Run(fmt.Sprintf("run=%d", n), func(t *testing.T) {
			r := newPgCutRun(t, src, dst, cutForward)
			o := r.drive(time.Second)
			require.Equal(t, cutover.Finalized, o.done.Outcome, o.done.Reason)
			dstWhere, _ := loadcheck.Stored(t, dst, r.dstDBs)
			// Lost (an acknowledged write on no shard) fails the run; a row PgDog's copy
			// put on another shard than its hash (seen with 9918e963: a few per run) is
			// counted and reported, not lost.
			l, m := 0, 0
			for _, w := range o.writes {
				switch at := dstWhere[w.Key]; {
				case !w.Acked():
				case len(at) == 0:
					l++
				case len(at) != 1 || at[0] != int(pghash.ShardOfInt8(w.Key, pgCutDst)):
					m++
				}
			}
			if _, err := loadcheck.ExactlyOnce(dstWhere, o.writes, pgCutDst, nil); err != nil {
				t.Logf("run %d: not exactly once on its hash shard: %v", n, err)
			}
			require.Zero(t, l, "acknowledged writes lost")
			windows = append(windows, o.pause.Window)
			acked, refused, lost, misplaced = acked+o.acked, refused+o.refused, lost+l, misplaced+m
			t.Logf("run %d: pause window %v; acknowledged %d, refused %d, lost %d, on another shard than the hash %d\n%s", n, o.pause.Window.Round(time.Microsecond), o.acked, o.refused, l, m, o.pause)
		})
	}
	require.Len(t, windows, runs, "every run measured")
	slices.Sort(windows)
	t.Logf("PGDOG FIGURES over %d runs at %d real PgDog instances, %d writers: pause window median %v, max %v; writes acknowledged %d, refused %d, lost %d, on another shard than the hash %d",
		runs, pgCutInstances, pgCutWorkers, windows[len(windows)/2].Round(100*time.Microsecond), windows[len(windows)-1].Round(100*time.Microsecond), acked, refused, lost, misplaced)
}
