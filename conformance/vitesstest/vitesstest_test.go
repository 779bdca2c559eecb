package vitesstest

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/vindex"
)

// TestRealShardedKeyspace: a keyspace of two shards, each a primary tablet on MariaDB,
// behind vtgate: a row written through vtgate lands on the shard whose key range holds its
// hash keyspace ID, computed by kernel/vindex, and nowhere else.
func TestRealShardedKeyspace(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "orders")
	tablets := c.AddShards(t, "orders", "-80", "80-")
	c.MustVtctldclient(t, "ApplySchema", "--sql", "CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(64))", "orders")
	c.MustVtctldclient(t, "ApplyVSchema", "--vschema", `{"sharded": true, "vindexes": {"hash": {"type": "hash"}}, "tables": {"orders": {"column_vindexes": [{"column": "id", "name": "hash"}]}}}`, "orders")
	out := c.MustVtctldclient(t, "GetTablets", "--keyspace", "orders")
	require.Equal(t, 2, strings.Count(string(out), " primary "), "two primaries:\n%s", out)

	g := c.StartVtgate(t, "orders")
	db, err := sql.Open("mysql", g.DSN("orders"))
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 20
	for id := 1; id <= n; id++ {
		_, err := db.ExecContext(ctx, "INSERT INTO orders (id, note) VALUES (?, ?)", id, "n"+strconv.Itoa(id))
		require.NoError(t, err)
	}
	total := 0
	for _, tb := range tablets {
		r := keyrange.MustParse(tb.Shard)
		for _, id := range Ints(t, tb, "SELECT id FROM orders") {
			require.True(t, r.ContainsKeyspaceID(vindex.Hash(uint64(id))), "row %d on shard %s", id, tb.Shard)
			total++
		}
	}
	require.Equal(t, n, total, "every row on exactly one shard")
	var count int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&count))
	require.Equal(t, n, count)
}
