package vitesstest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/vindex"
)

// TestDerivedFilesRefuseAnotherLayout: a Vitess whose files no longer hold the lines the
// derivation removes is an error that says to re-derive, not a silent copy.
func TestDerivedFilesRefuseAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "config", "mycnf"), 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config", name), []byte(text), 0o644))
	}
	write("mycnf/default.cnf", "port = {{.MysqlPort}}\n")
	write("mycnf/mariadb10.cnf", "binlog_format = ROW\n")
	write("init_db.sql", "CREATE USER 'vt_dba'@'localhost';\n")
	_, err := mycnfTemplate(dir)
	require.ErrorContains(t, err, "expected one plugin-load line")
	_, err = initDBSQL(dir)
	require.ErrorContains(t, err, "re-derive it")

	write("mycnf/mariadb10.cnf", "binlog_format = ROW\nplugin-load = a=semisync_master.so\nrpl_semi_sync_master_timeout = 1\n")
	write("init_db.sql", "# keeps super_read_only in a comment\nSET GLOBAL super_read_only='OFF';\nCREATE USER 'vt_dba'@'localhost';\n")
	cnf, err := mycnfTemplate(dir)
	require.NoError(t, err)
	require.Equal(t, "[mysqld]\nport = {{.MysqlPort}}\nbinlog_format = ROW\nrpl_semi_sync_master_timeout = 1\n"+testMycnf, cnf)
	sql, err := initDBSQL(dir)
	require.NoError(t, err)
	require.Equal(t, "# keeps super_read_only in a comment\nCREATE USER 'vt_dba'@'localhost';\n", sql)
}

// TestRealDerivedFiles: the files derived from Vitess v0.24.4's own keep everything but the
// lines MariaDB cannot take.
func TestRealDerivedFiles(t *testing.T) {
	dir, err := moduleDir()
	if err != nil {
		fail(t, err)
	}
	cnf, err := mycnfTemplate(dir)
	require.NoError(t, err)
	require.NotContains(t, cnf, "semisync_master.so")
	require.Contains(t, cnf, "binlog_format = ROW")
	require.Contains(t, cnf, "datadir = {{.DataDir}}")
	require.Contains(t, cnf, "bind-address = 127.0.0.1")
	sql, err := initDBSQL(dir)
	require.NoError(t, err)
	require.Contains(t, sql, "CREATE USER 'vt_dba'@'localhost';")
	for _, l := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(l, "#") {
			require.NotContains(t, l, "super_read_only")
		}
	}
}

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
		for _, id := range tb.Ints(t, "SELECT id FROM orders") {
			require.True(t, r.ContainsKeyspaceID(vindex.Hash(uint64(id))), "row %d on shard %s", id, tb.Shard)
			total++
		}
	}
	require.Equal(t, n, total, "every row on exactly one shard")
	var count int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&count))
	require.Equal(t, n, count)
}
