package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// skewClock is the clock injected into the monitor: the real clock plus a skew the test
// moves, so minutes of a transaction's age pass at once. Prepare times come from the
// servers' real clocks, so a skew of d makes every prepared transaction d older.
type skewClock struct{ skew atomic.Int64 } // ms

func (c *skewClock) set(d time.Duration) { c.skew.Store(d.Milliseconds()) }

// skewed runs a machine on the injected clock inside the real driver: ctx.Now is the
// injected time, and timer deadlines go back to the driver on its real clock.
type skewed struct {
	m driver.Machine[indoubt.Input, indoubt.Command, indoubt.Snapshot]
	c *skewClock
}

func (s skewed) On(ctx *machine.Ctx, in indoubt.Input) []indoubt.Command {
	skew := s.c.skew.Load()
	ctx.Now += skew
	cmds := s.m.On(ctx, in)
	for i, c := range cmds {
		if t, ok := c.(indoubt.SetTimer); ok {
			t.At -= skew
			cmds[i] = t
		}
	}
	return cmds
}

func (s skewed) Snapshot() indoubt.Snapshot { return s.m.Snapshot() }

// countingLister counts the scans of one shard; it hands the executor nothing but Prepared.
type countingLister struct {
	b     *postgres.Backend
	scans atomic.Int64
}

func (l *countingLister) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) {
	l.scans.Add(1)
	return l.b.Prepared(ctx)
}

type staticRoster []adapters.RouterProcess

func (r staticRoster) Processes(context.Context) ([]adapters.RouterProcess, error) { return r, nil }

// recordingSink keeps the alerts raised and not cleared, and how many raises and clears came.
type recordingSink struct {
	mu      sync.Mutex
	raised  map[string]indoubt.Alert
	history []string
}

func (s *recordingSink) Raise(_ context.Context, a indoubt.Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raised[a.ID] = a
	s.history = append(s.history, "raise "+a.ID)
	return nil
}

func (s *recordingSink) Clear(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.raised, id)
	s.history = append(s.history, "clear "+id)
	return nil
}

func (s *recordingSink) snapshot() (map[string]indoubt.Alert, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.raised), slices.Clone(s.history)
}

// preparedRow is one row of pg_prepared_xacts, with the transaction id, to show the monitor
// never finished or replaced one.
type preparedRow struct {
	xid      uint32
	prepared time.Time
}

func preparedRows(t *testing.T, s *pgtest.Server) map[string]preparedRow {
	conn := s.Connect(t, "app")
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), "SELECT gid, transaction::text::int8, prepared FROM pg_prepared_xacts WHERE database = 'app'")
	require.NoError(t, err)
	out := map[string]preparedRow{}
	for rows.Next() {
		var gid string
		var xid int64
		var at time.Time
		require.NoError(t, rows.Scan(&gid, &xid, &at))
		out[gid] = preparedRow{xid: uint32(xid), prepared: at}
	}
	require.NoError(t, rows.Err())
	return out
}

// TestRealInDoubtMonitor runs the in-doubt monitor end to end: the real driver, the driver's
// executor, and this package's Backend on two real shards holding PgDog-style prepared
// transactions (gids __pgdog_2pc_<deployment>_<instance>_<random>_<shard>) of a live
// coordinator, a gone one, a restarted one, one without NODE_ID that restarted under a new
// random id, another deployment's and an application's own. With the monitor's clock
// injected, nothing is alerted below the threshold; past it exactly the gone, restarted
// and foreign ones are; an operator's COMMIT/ROLLBACK PREPARED clears theirs; and every
// transaction nobody resolved is still prepared, the same transaction, rows unseen.
func TestRealInDoubtMonitor(t *testing.T) {
	const deployment = "prod-app"
	const threshold = 5 * time.Minute
	shards := map[string]*pgtest.Server{"s0": pg.Get(t), "s1": pgtest.Start(t, serverSettings...)}
	ctx := t.Context()
	listers := map[string]*countingLister{}
	for name, s := range shards {
		s.CreateDatabase(t, "app")
		s.Exec(t, "app", "CREATE ROLE app_2pc LOGIN; CREATE TABLE items (id bigint, v text); GRANT INSERT, SELECT ON items TO app_2pc")
		b, err := postgres.Open(ctx, s.DSN("app"), postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		listers[name] = &countingLister{b: b}
	}
	prepare := func(shard, gid string, id int64) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsnAs(shards[shard], "app", "app_2pc"))
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, "BEGIN; INSERT INTO items VALUES ($1, 'in doubt'); PREPARE TRANSACTION $2", pgx.QueryExecModeSimpleProtocol, id, gid)
		require.NoError(t, err, "preparing %s on %s", gid, shard)
	}
	gid := func(instance string, n int, shard int) string {
		return fmt.Sprintf("__pgdog_2pc_%s_%s_%d_%d", deployment, instance, 9_000_000_000_000_000_000+uint64(n), shard)
	}
	// live: node-0 (PgDog retries its own); gone: node-1, and a45f12bc (no NODE_ID, its
	// process restarted as b9c0d1e2); restarted: node-2 (same NODE_ID, started after).
	for i, inst := range []string{"node-0", "node-1", "node-2", "a45f12bc"} {
		prepare("s0", gid(inst, i, 0), int64(10*i))
		prepare("s1", gid(inst, i, 1), int64(10*i+1))
	}
	prepare("s1", gid("node-1", 7, 1), 71) // its coordinator died between the two prepares
	prepare("s0", "app own gid", 100)
	prepare("s1", "__pgdog_2pc_staging-app_node-9_5_0", 101)
	before := map[string]map[string]preparedRow{"s0": preparedRows(t, shards["s0"]), "s1": preparedRows(t, shards["s1"])}
	require.Len(t, before["s0"], 5)
	require.Len(t, before["s1"], 6)

	now := time.Now().UnixMilli()
	roster := staticRoster{{ID: "node-0", Started: time.UnixMilli(now - time.Hour.Milliseconds())}, {ID: "node-2", Started: time.UnixMilli(now + 1000)}, {ID: "b9c0d1e2", Started: time.UnixMilli(now)}}
	sink := &recordingSink{raised: map[string]indoubt.Alert{}}
	exec := &driver.InDoubtExecutor{
		Shard: func(name string) (driver.PreparedLister, bool) {
			l, ok := listers[name]
			return l, ok
		},
		Roster: roster,
		Alerts: sink,
	}
	clock := &skewClock{}
	kind := driver.InDoubt(exec, indoubt.Options{Period: 100 * time.Millisecond, Threshold: threshold, Deployment: deployment})
	newM, restore := kind.New, kind.Restore
	kind.New = func() driver.Machine[indoubt.Input, indoubt.Command, indoubt.Snapshot] { return skewed{newM(), clock} }
	kind.Restore = func(s indoubt.Snapshot) (driver.Machine[indoubt.Input, indoubt.Command, indoubt.Snapshot], error) {
		m, err := restore(s)
		return skewed{m, clock}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- driver.Run(runCtx, kind, driver.Config[indoubt.Input]{ID: "ns/app", Trace: machine.Discard, Logger: slog.New(slog.DiscardHandler)}, indoubt.Input(indoubt.Track{Shards: []string{"s0", "s1"}}))
	}()
	defer func() {
		stop()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	rounds := func(n int64) {
		t.Helper()
		from := [2]int64{listers["s0"].scans.Load(), listers["s1"].scans.Load()}
		require.Eventually(t, func() bool {
			return listers["s0"].scans.Load() >= from[0]+n && listers["s1"].scans.Load() >= from[1]+n
		}, 20*time.Second, 10*time.Millisecond, "the monitor stopped scanning")
	}

	rounds(3)
	raised, _ := sink.snapshot()
	require.Empty(t, raised, "nothing is alerted while every transaction is younger than the threshold")
	clock.set(threshold - 30*time.Second)
	rounds(3)
	raised, _ = sink.snapshot()
	require.Empty(t, raised, "nothing is alerted 30s before the threshold")

	clock.set(threshold + time.Minute)
	want := map[string]indoubt.Reason{
		"coordinator/node-1":   indoubt.ReasonGone,
		"coordinator/node-2":   indoubt.ReasonRestarted,
		"coordinator/a45f12bc": indoubt.ReasonGone,
		"foreign/s0":           indoubt.ReasonForeign,
		"foreign/s1":           indoubt.ReasonForeign,
	}
	require.Eventually(t, func() bool { raised, _ = sink.snapshot(); return len(raised) == len(want) }, 20*time.Second, 10*time.Millisecond)
	rounds(3)
	raised, _ = sink.snapshot()
	got := map[string]indoubt.Reason{}
	parts := map[string][]string{}
	for id, a := range raised {
		got[id] = a.Reason
		for _, txn := range a.Txns {
			for _, p := range txn.Parts {
				parts[id] = append(parts[id], p.Shard+" "+p.GID)
				require.Equal(t, "app_2pc", p.Owner)
				require.Equal(t, "app", p.Database, "the operator resolves on this database")
			}
		}
		slices.Sort(parts[id])
	}
	require.Equal(t, want, got, "exactly the gone, restarted and foreign coordinators are alerted; node-0 runs and is left alone")
	require.Equal(t, []string{"s0 " + gid("node-1", 1, 0), "s1 " + gid("node-1", 1, 1), "s1 " + gid("node-1", 7, 1)}, parts["coordinator/node-1"])
	require.Equal(t, []string{"s0 " + gid("node-2", 2, 0), "s1 " + gid("node-2", 2, 1)}, parts["coordinator/node-2"])
	require.Equal(t, []string{"s0 " + gid("a45f12bc", 3, 0), "s1 " + gid("a45f12bc", 3, 1)}, parts["coordinator/a45f12bc"])
	require.Equal(t, []string{"s0 app own gid"}, parts["foreign/s0"])
	require.Equal(t, []string{"s1 __pgdog_2pc_staging-app_node-9_5_0"}, parts["foreign/s1"], "another deployment's transaction is not this one's to judge")

	// The operator resolves node-1's transaction (committed: its rows appear) and the
	// application's own (rolled back), as a superuser since they are in doubt.
	operator := func(shard, stmt, gid string) {
		conn := shards[shard].Connect(t, "app")
		_, err := conn.Exec(ctx, stmt+" $1", pgx.QueryExecModeSimpleProtocol, gid)
		require.NoError(t, err, "%s %s on %s", stmt, gid, shard)
	}
	operator("s0", "COMMIT PREPARED", gid("node-1", 1, 0))
	operator("s1", "COMMIT PREPARED", gid("node-1", 1, 1))
	operator("s1", "COMMIT PREPARED", gid("node-1", 7, 1))
	operator("s0", "ROLLBACK PREPARED", "app own gid")
	require.Eventually(t, func() bool { raised, _ = sink.snapshot(); return len(raised) == 3 }, 20*time.Second, 10*time.Millisecond)
	rounds(3)
	raised, history := sink.snapshot()
	require.ElementsMatch(t, []string{"coordinator/node-2", "coordinator/a45f12bc", "foreign/s1"}, slices.Collect(maps.Keys(raised)))
	require.Contains(t, history, "clear coordinator/node-1")
	require.Contains(t, history, "clear foreign/s0")

	// Never touched: every transaction nobody resolved is still prepared as the same
	// transaction, and its rows are still unseen.
	resolved := map[string]bool{gid("node-1", 1, 0): true, gid("node-1", 1, 1): true, gid("node-1", 7, 1): true, "app own gid": true}
	for name, s := range shards {
		after := preparedRows(t, s)
		for g, row := range before[name] {
			if resolved[g] {
				require.NotContains(t, after, g)
				continue
			}
			require.Equal(t, row, after[g], "%s: %s must be the same prepared transaction", name, g)
		}
		require.Len(t, after, len(before[name])-map[string]int{"s0": 2, "s1": 2}[name])
	}
	require.Equal(t, "10", shards["s0"].QueryString(t, "app", "SELECT string_agg(id::text, ',' ORDER BY id) FROM items"), "only the resolved commit's row")
	require.Equal(t, "11,71", shards["s1"].QueryString(t, "app", "SELECT string_agg(id::text, ',' ORDER BY id) FROM items"))
}
