package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

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
// random id, another deployment's and an application's own. On a fake clock
// (driver.FakeClock) that the test moves round by round, nothing is alerted below the
// threshold; past it exactly the gone, restarted
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
	const period = 100 * time.Millisecond
	clock := driver.NewFakeClock(time.Now())
	start := clock.Now() // every transaction was prepared before it
	store := memstore.New()
	kind := driver.InDoubt(exec, indoubt.Options{Period: period, Threshold: threshold, Deployment: deployment})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- driver.Run(runCtx, kind, driver.Config[indoubt.Input]{ID: "ns/app", Store: store, Clock: clock, Trace: machine.Discard, Logger: slog.New(slog.DiscardHandler)},
			indoubt.Input(indoubt.Track{Shards: []string{"s0", "s1"}}))
	}()
	defer func() {
		stop()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	// monitor is the monitor's state as the driver saved it after its last step, with the
	// number of rounds closed (every reply in, the alerts decided).
	monitor := func() (indoubt.Snapshot, int) {
		b, err := store.GetBlob(ctx, driver.SnapshotKey(kind.Name, "ns/app"))
		if errors.Is(err, adapters.ErrNotFound) {
			return indoubt.Snapshot{}, 0
		}
		require.NoError(t, err)
		var s indoubt.Snapshot
		require.NoError(t, json.Unmarshal(b.Data, &s))
		if s.Open {
			return s, int(s.Round) - 1
		}
		return s, int(s.Round)
	}
	// closed waits until n rounds have closed, and checks every reply of the last one came
	// within it.
	closed := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { _, c := monitor(); return c >= n }, 20*time.Second, 5*time.Millisecond, "round %d did not close", n)
		s, _ := monitor()
		require.True(t, s.Roster.Fresh, "the roster answered within the round")
		for _, sh := range s.Shards {
			require.Zero(t, sh.Failures, "shard %s answered within the round: %s", sh.Name, sh.Err)
		}
	}
	// round moves the clock to at, where the round timer the last (closed) round set is
	// due, and waits until the round that opens then has closed too.
	round := func(at time.Time) {
		t.Helper()
		_, n := monitor()
		wait, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, clock.WaitPending(wait, 1), "the monitor sets its round timer")
		clock.Set(at)
		closed(n + 1)
	}
	rounds := func(at time.Time, n int) {
		t.Helper()
		round(at)
		for range n - 1 {
			round(clock.Now().Add(period))
		}
	}
	// quiet checks that no alert was decided or raised.
	quiet := func(msg string) {
		t.Helper()
		s, _ := monitor()
		require.Empty(t, s.Alerts, msg)
		raised, _ := sink.snapshot()
		require.Empty(t, raised, msg)
	}

	closed(1)
	rounds(clock.Now().Add(period), 2)
	quiet("nothing is alerted while every transaction is younger than the threshold")
	rounds(start.Add(threshold-30*time.Second), 3)
	quiet("nothing is alerted 30s before the threshold")

	rounds(start.Add(threshold+time.Minute), 1)
	var raised map[string]indoubt.Alert
	want := map[string]indoubt.Reason{
		"coordinator/node-1":   indoubt.ReasonGone,
		"coordinator/node-2":   indoubt.ReasonRestarted,
		"coordinator/a45f12bc": indoubt.ReasonGone,
		"foreign/s0":           indoubt.ReasonForeign,
		"foreign/s1":           indoubt.ReasonForeign,
	}
	require.Eventually(t, func() bool { raised, _ = sink.snapshot(); return len(raised) == len(want) }, 20*time.Second, 10*time.Millisecond)
	rounds(clock.Now().Add(period), 3)
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
	rounds(clock.Now().Add(period), 1)
	require.Eventually(t, func() bool { raised, _ = sink.snapshot(); return len(raised) == 3 }, 20*time.Second, 10*time.Millisecond)
	rounds(clock.Now().Add(period), 3)
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
