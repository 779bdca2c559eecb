package pgdog_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/conformance/pgdogtest"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/shardmap"
)

// The tests named TestRealPgDog... run the adapter against real PgDog instances
// (conformance/pgdogtest, LOAM_PGDOG_BIN) whose shards are databases on a real Postgres
// (conformance/pgtest) with logical replication on, for COPY_DATA. Without LOAM_PGDOG_BIN
// they skip, before any Postgres starts.

// pg is the package's Postgres, shared by the real tests.
var (
	pg       = pgtest.NewShared(pgtest.WithSettings(map[string]string{"wal_level": "logical", "max_replication_slots": "32", "max_wal_senders": "32", "max_connections": "200"}))
	rolesOne sync.Once
	rigSeq   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	pgDst.Close()
	pgtest.RemoveTemplate()
	os.Exit(code)
}

// realServer returns the shared Postgres with the roles the files name: app (the clients)
// and migrator (the schema owner COPY_DATA needs; a superuser, so it may create slots and
// publications and dump the schema).
func realServer(t *testing.T) *pgtest.Server {
	t.Helper()
	pgdogtest.Require(t) // skip before starting Postgres when there is no PgDog
	srv := pg.Get(t)
	rolesOne.Do(func() {
		srv.Exec(t, "postgres", "CREATE ROLE app LOGIN PASSWORD 'app-secret'; CREATE ROLE migrator LOGIN SUPERUSER REPLICATION PASSWORD 'migrator-secret'")
	})
	return srv
}

// shards makes n databases on srv, each with table orders (owned by migrator, open to app)
// and publication loam_pub of it when pub is set.
func shards(t *testing.T, srv *pgtest.Server, prefix string, n int, withTable bool) []string {
	t.Helper()
	id := rigSeq.Add(1)
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s%d_%d", prefix, id, i)
		srv.CreateDatabase(t, name)
		if withTable {
			srv.Exec(t, name, "CREATE TABLE orders (id bigint PRIMARY KEY, v text); ALTER TABLE orders OWNER TO migrator; GRANT ALL ON orders TO app; CREATE PUBLICATION loam_pub FOR TABLE orders")
		} else {
			srv.Exec(t, name, "GRANT ALL ON SCHEMA public TO app")
		}
		names = append(names, name)
	}
	dropSlotsAtEnd(t, srv, names...)
	return names
}

// dropSlotsAtEnd drops, when the test ends, the replication slots made in dbs on srv.
// PgDog names a COPY_DATA's slots <slot>_<shard> and a stopped or rolled-back copy can
// leave them; slot names are the server's, so a later test's COPY_DATA naming the same
// slot (loam_app_2 is every first cutover's) fails with 55000 "replication slot ... was
// not created in this database". A logical slot is dropped from the database that made
// it, after its walsender (PgDog, stopped by then: its cleanup was registered later) is
// gone.
func dropSlotsAtEnd(t *testing.T, srv *pgtest.Server, dbs ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, db := range dbs {
			c, err := pgx.Connect(ctx, srv.DSN(db))
			if err != nil {
				t.Errorf("dropping the slots of %s: %v", db, err)
				continue
			}
			for ctx.Err() == nil { // a terminated walsender takes a moment to release its slot
				_, err = c.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NOT NULL")
				if err == nil {
					_, err = c.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database() AND active_pid IS NULL")
				}
				var left int
				if err == nil {
					err = c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()").Scan(&left)
				}
				if err != nil || left == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err == nil {
				err = ctx.Err() // slots still held when the time ran out
			}
			if err != nil {
				t.Errorf("dropping the slots of %s: %v", db, err)
			}
			c.Close(context.Background())
		}
	})
}

// realRecord is database app hash-sharded on orders.id over dbs on srv.
func realRecord(srv *pgtest.Server, g uint64, dbs ...string) *shardmap.Record {
	var bs []shardmap.Backend
	for _, d := range dbs {
		bs = append(bs, shardmap.Backend{Host: "127.0.0.1", Port: uint16(srv.Port), Database: d})
	}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"orders"}}, bs...)
	rec.Generation = g
	return rec
}

// realResharding is rec moving to dsts on srv.
func realResharding(srv *pgtest.Server, rec *shardmap.Record, dsts ...string) *shardmap.Record {
	target := realRecord(srv, rec.Generation, dsts...).Layout
	for i := range target.Shards {
		target.Shards[i].Name = fmt.Sprintf("n%d", i)
		target.Shards[i].Fence = shardmap.FenceOpen
	}
	rec.Target = &target
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: rec.Generation + 1}
	return rec
}

// startPgDog starts a real PgDog on rec's files and an adapter Instance on it.
func startPgDog(t *testing.T, rec *shardmap.Record) (*pgdogtest.Instance, *pgdog.Instance) {
	t.Helper()
	p := pgdogtest.Start(t, rec.Generation, renderFiles(t, rec))
	i, err := pgdog.New(pgdog.Config{ID: "pgdog-1", Admin: p.AdminDSN(adminPassword), Dir: p.Dir, Database: "app"})
	require.NoError(t, err)
	t.Cleanup(func() { i.Close() })
	waitAdmin(t, i, p)
	return p, i
}

// waitAdmin waits until the admin database answers (PgDog listens before it has loaded
// every pool).
func waitAdmin(t *testing.T, i *pgdog.Instance, p *pgdogtest.Instance) {
	t.Helper()
	var err error
	for range 200 {
		if _, err = i.Version(context.Background()); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("the admin database of pgdog on port %d does not answer: %v\n%s", p.Port, err, p.LogTail())
}

// clientConn logs in to PgDog as app on database db (simple protocol: what PgDog routes
// without prepared statements).
func clientConn(t testing.TB, p *pgdogtest.Instance, db string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(p.DSN("app", "app-secret", db))
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err, p.LogTail())
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// holders lists which of dbs hold the row with id key.
func holders(t testing.TB, srv *pgtest.Server, dbs []string, key int64) []int {
	t.Helper()
	var out []int
	for i, d := range dbs {
		c := srv.Connect(t, d)
		var n int
		require.NoError(t, c.QueryRow(context.Background(), "SELECT count(*) FROM orders WHERE id = $1", key).Scan(&n))
		c.Close(context.Background())
		for range n {
			out = append(out, i)
		}
	}
	return out
}
