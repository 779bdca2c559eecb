package mergediff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/merge"
	"loam.dev/router/proof/oracle"
)

// TestMain removes the pgtest template once the package's tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.RemoveTemplate()
	os.Exit(code)
}

// envInt reads a positive integer from the environment, or returns def.
func envInt(t *testing.T, name string, def uint64) uint64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err, name)
	return v
}

// cluster is the data on one unsharded server and, for each shard count, on that many
// servers (shard i of every count on server i, each count in a schema of its own).
type cluster struct {
	unsharded *pgx.Conn
	shards    map[int][]*pgx.Conn // shard count -> one connection per shard
}

const rowCount = 600

var shardCounts = []int{2, 3, 4}

func startCluster(t *testing.T, rows []Row) *cluster {
	ctx := t.Context()
	// Each shard count lives in a schema of its own (found through search_path), which is
	// much cheaper to make than a database.
	load := func(s *pgtest.Server, schema string, rows []Row) *pgx.Conn {
		cfg, err := pgx.ParseConfig(s.DSN("postgres"))
		require.NoError(t, err)
		cfg.RuntimeParams["search_path"] = schema
		conn, err := pgx.ConnectConfig(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close(context.Background()) })
		stmts := append([]string{"CREATE SCHEMA " + schema, Schema}, Inserts(rows, 200)...)
		for _, stmt := range stmts {
			_, err := conn.Exec(ctx, stmt)
			require.NoError(t, err, "%.200s", stmt)
		}
		return conn
	}
	c := &cluster{shards: map[int][]*pgx.Conn{}}
	c.unsharded = load(pgtest.Start(t), "whole", rows)
	servers := make([]*pgtest.Server, shardCounts[len(shardCounts)-1])
	for i := range servers {
		servers[i] = pgtest.Start(t)
	}
	for _, n := range shardCounts {
		var total int64
		for i, part := range Split(rows, n) {
			conn := load(servers[i], "n"+strconv.Itoa(n), part)
			var count int64
			require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&count))
			require.NotZero(t, count, "shard %d of %d holds no rows: the split would test nothing", i, n)
			total += count
			c.shards[n] = append(c.shards[n], conn)
		}
		require.EqualValues(t, len(rows), total)
	}
	return c
}

// query runs sql in text format (the simple protocol) and decodes every row.
func query(ctx context.Context, conn *pgx.Conn, sql string) ([]merge.Row, error) {
	rows, err := conn.Query(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []merge.Row
	for rows.Next() {
		r, err := DecodeRow(rows.FieldDescriptions(), rows.RawValues())
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// variant breaks one step of the sharded side, for the mutant test; "" is the real thing.
type variant string

const (
	honest                 variant = ""
	shardLimitIgnoresOffet variant = "shard-limit-ignores-offset"
	dropLastShard          variant = "drop-last-shard"
	shardNullsDefault      variant = "shard-nulls-default"
)

func (v variant) shardSQL(q Query) (string, error) {
	switch {
	case v == shardLimitIgnoresOffet && q.Agg == nil:
		return "SELECT " + strings.Join(Columns, ", ") + " FROM t" + q.where() + q.orderSQL() + limitSQL(merge.Limit{Count: q.Limit.Count}), nil
	case v == shardNullsDefault && q.Agg == nil:
		bare := Query{Where: q.Where, Limit: q.Limit}
		for _, k := range q.Order {
			bare.Order = append(bare.Order, merge.Key{Col: k.Col, Desc: k.Desc})
		}
		return bare.ShardSQL()
	}
	return q.ShardSQL()
}

// mismatch is one query whose merged answer differs, with everything needed to see why.
type mismatch struct {
	q         Query
	shardSQL  string
	n         int
	want, got []merge.Row
	err       error
	line      []byte // the protocol request, when the proved oracle disagreed
	goAns     []byte
	proved    []byte
}

func (m mismatch) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "query:   %s\nshards:  %d, each running: %s\nproblem: %v\n", m.q.SQL(), m.n, m.shardSQL, m.err)
	fmt.Fprintf(&b, "unsharded answer (%d rows):\n", len(m.want))
	for _, r := range m.want {
		fmt.Fprintf(&b, "  %v\n", r)
	}
	fmt.Fprintf(&b, "merged answer (%d rows):\n", len(m.got))
	for _, r := range m.got {
		fmt.Fprintf(&b, "  %v\n", r)
	}
	if m.line != nil {
		fmt.Fprintf(&b, "request:      %s\nkernel/merge: %s\nproved:       %s\n", clip(m.line), clip(m.goAns), clip(m.proved))
	}
	return b.String()
}

// clip shortens a protocol line for a message; the query and seed replay it whole.
func clip(line []byte) string {
	const max = 3000
	if len(line) <= max {
		return string(line)
	}
	return fmt.Sprintf("%s… (%d bytes in all)", line[:max], len(line))
}

// stats counts what the stream exercised.
type stats struct {
	queries, ordered, total, windowed, cutRuns, aggregates, grouped, comparisons, proved int
}

// run sends count queries drawn from rng through every shard count and returns the
// mismatches (at most max). Three opinions are compared: unsharded Postgres, kernel/merge
// combining the shards, and, when o is not nil, the proved oracle combining the same shard
// answers (it must give kernel/merge's answer byte for byte).
func (c *cluster) run(ctx context.Context, rng *rand.Rand, count int, v variant, max int, o *oracle.Oracle) ([]mismatch, stats, error) {
	var st stats
	var bad []mismatch
	for range count {
		q := Generate(rng)
		st.queries++
		if q.Agg == nil {
			st.ordered++
			if q.Total() {
				st.total++
			}
			if q.Limit.Count >= 0 || q.Limit.Offset > 0 {
				st.windowed++
			}
		} else {
			st.aggregates++
			if len(q.Agg.GroupBy) > 0 {
				st.grouped++
			}
		}
		want, err := query(ctx, c.unsharded, q.SQL())
		if err != nil {
			return nil, st, fmt.Errorf("unsharded: %s: %w", q.SQL(), err)
		}
		var full []merge.Row
		if q.NeedsFull() {
			if full, err = query(ctx, c.unsharded, q.FullSQL()); err != nil {
				return nil, st, fmt.Errorf("unsharded: %s: %w", q.FullSQL(), err)
			}
			if len(full) > len(want) {
				st.cutRuns++
			}
		}
		sql, err := v.shardSQL(q)
		if err != nil {
			return nil, st, fmt.Errorf("%s: %w", q.SQL(), err)
		}
		for _, n := range shardCounts {
			per := make([][]merge.Row, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i, conn := range c.shards[n] {
				wg.Go(func() { per[i], errs[i] = query(ctx, conn, sql) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					return nil, st, fmt.Errorf("shard %d of %d: %s: %w", i, n, sql, err)
				}
			}
			if v == dropLastShard {
				per = per[:n-1]
			}
			st.comparisons++
			got, err := q.Combine(per)
			if err == nil {
				err = q.Check(want, got, full)
			}
			var line, goAns, proved []byte
			if err == nil && o != nil {
				st.proved++
				line = merge.AppendRequest(nil, q.Request(per))
				goAns = merge.Respond(nil, line)
				if proved, err = o.Ask(line); err != nil {
					return nil, st, err
				}
				if err = nil; !oracle.Agree(goAns, proved) {
					err = fmt.Errorf("the proved oracle's answer differs from kernel/merge's")
				} else {
					line = nil
				}
			}
			if err != nil {
				bad = append(bad, mismatch{q: q, shardSQL: sql, n: n, want: want, got: got, err: err, line: line, goAns: goAns, proved: proved})
				if len(bad) >= max {
					return bad, st, nil
				}
			}
		}
	}
	return bad, st, nil
}

// TestRealMergeDifferential: every query of a seeded stream, merged from 2, 3 and 4 real
// Postgres shards by kernel/merge, equals the answer of one unsharded Postgres holding all
// rows. LOAM_TEST_SEED replays a stream; LOAM_MERGEDIFF_QUERIES changes its length (default
// 2000). Then each deliberately broken sharded side must be caught within 300 queries.
func TestRealMergeDifferential(t *testing.T) {
	seed := envInt(t, "LOAM_TEST_SEED", uint64(time.Now().UnixNano()))
	count := envInt(t, "LOAM_MERGEDIFF_QUERIES", 2000)
	t.Logf("seed %d (replay with LOAM_TEST_SEED=%d)", seed, seed)
	rows := Rows(rand.New(rand.NewPCG(seed, 1)), rowCount)
	c := startCluster(t, rows)
	ctx := t.Context()
	o := oracle.Optional(t)

	t0 := time.Now()
	bad, st, err := c.run(ctx, rand.New(rand.NewPCG(seed, 2)), int(count), honest, 5, o)
	require.NoError(t, err, "seed %d", seed)
	for _, m := range bad {
		t.Errorf("seed %d: merged answer differs from Postgres's\n%s", seed, m)
	}
	t.Logf("%d queries (%d ordered: %d total orders, %d windowed, %d cutting a run of ties; %d aggregations, %d grouped), %d merged answers compared with Postgres, %d of them with the proved oracle too, in %v",
		st.queries, st.ordered, st.total, st.windowed, st.cutRuns, st.aggregates, st.grouped, st.comparisons, st.proved, time.Since(t0).Round(time.Millisecond))
	require.GreaterOrEqual(t, st.cutRuns, 1, "the stream must cut runs of ties, or the multiset comparison is untested")

	for _, v := range []variant{shardLimitIgnoresOffet, dropLastShard, shardNullsDefault} {
		t.Run(string(v), func(t *testing.T) {
			bad, _, err := c.run(ctx, rand.New(rand.NewPCG(seed, 3)), 300, v, 1, nil)
			require.NoError(t, err)
			require.NotEmpty(t, bad, "seed %d: %s went unnoticed for 300 queries", seed, v)
			t.Logf("caught:\n%s", bad[0])
		})
	}
	// The third opinion is a real one: the oracle with a difference planted is caught.
	for _, m := range []string{"tie", "avg-round"} {
		t.Run("proved-oracle-mutant-"+m, func(t *testing.T) {
			mo := oracle.Require(t, "--mutant="+m)
			bad, _, err := c.run(ctx, rand.New(rand.NewPCG(seed, 4)), 300, honest, 1, mo)
			require.NoError(t, err)
			require.NotEmpty(t, bad, "seed %d: the oracle's %s mutant went unnoticed for 300 queries", seed, m)
			require.NotNil(t, bad[0].line, "seed %d: the mismatch must be the oracle's, not Postgres's:\n%s", seed, bad[0])
			t.Logf("caught:\n%s", bad[0])
		})
	}
}
