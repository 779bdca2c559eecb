package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/conformance/mysqltest"
	"loam.dev/router/conformance/vitesstest"
	"loam.dev/router/kernel/shardmap"
)

// vitessCluster is the real Vitess the tests of this package share (TestMain closes it);
// each test has keyspaces of its own.
var vitessCluster vitesstest.Shared

// vitessDaemon is a controller for database app, keyspace keyspace of the real Vitess c,
// whose record names old1 and old2 (real MariaDB servers) as the primaries of -80 and 80-.
// It returns the config path; the daemon runs until the test ends.
func vitessDaemon(t *testing.T, c *vitesstest.Cluster, keyspace string, old1, old2 *mysqltest.Server) string {
	t.Helper()
	setFleetSecrets(t)
	dir := t.TempDir()
	listen := freePort(t)
	conf := daemonTOML{ID: "ctl-vitess", LeaseTTL: "1s", Listen: listen, Store: dirStore(filepath.Join(dir, "data")), FilesDir: filepath.Join(dir, "files"),
		DB: "shard_user = \"root\"\n" + indoubtOff + fmt.Sprintf("[databases.vitess]\nvtctld = %q\ntimeout = \"20s\"\n", c.VtctldAddr)}.write(t, filepath.Join(dir, "loam.toml"))

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	be := func(s *mysqltest.Server) shardmap.Backend {
		return shardmap.Backend{Host: "127.0.0.1", Port: uint16(s.Port), Database: "vt_" + keyspace, Tablet: "zone1-0000000900"}
	}
	rec, err := shardmap.NewVindex(keyspace, shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, shardmap.VindexHash, be(old1), be(old2))
	require.NoError(t, err)
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, rec)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	serveIn(t, &cli{}, conf, nil)
	// The CLI's requests go through the running daemon's store API: wait until it leads, or
	// a request could find the store file without a daemon behind it.
	require.Eventually(t, func() bool {
		s, err := getStatus(listen)
		return err == nil && s.Leader
	}, 60*time.Second, 20*time.Millisecond, "the daemon never led")
	return conf
}

// vrun runs one command of the real CLI (openFleet: vtctld and MySQL).
func vrun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootFor(&cli{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func accountLocked(t *testing.T, s *mysqltest.Server) bool {
	return strings.Contains(s.QueryString(t, "SHOW CREATE USER 'app'@'%'"), "ACCOUNT LOCK")
}

func tabletType(t *testing.T, c *vitesstest.Cluster, alias string) string {
	t.Helper()
	var tb struct {
		Type string `json:"type"` // vtctldclient prints the enum's name
	}
	out := c.MustVtctldclient(t, "GetTablet", alias)
	require.NoError(t, json.Unmarshal(out, &tb), "%s", out)
	return tb.Type
}

// vitessFailover sets up a failover of keyspace/-80: two MariaDB servers with an app account
// as the record's old primaries of -80 and 80-, the promoted tablet (a REPLICA of -80, which
// has no primary in Vitess), the daemon, and the --to value for the promoted tablet.
func vitessFailover(t *testing.T, keyspace string) (c *vitesstest.Cluster, old1, old2 *mysqltest.Server, promoted *vitesstest.Tablet, conf, to string) {
	t.Helper()
	c = vitessCluster.Get(t)
	old1, old2 = mysqltest.Start(t), mysqltest.Start(t)
	for _, s := range []*mysqltest.Server{old1, old2} {
		s.Exec(t, "", "CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw'")
		s.CreateDatabase(t, "vt_"+keyspace) // the tablet's database, as on a primary of the keyspace
	}
	c.CreateKeyspace(t, keyspace)
	promoted = c.StartTablet(t, keyspace, "-80")
	require.Equal(t, "REPLICA", tabletType(t, c, promoted.Alias))
	conf = vitessDaemon(t, c, keyspace, old1, old2)
	return c, old1, old2, promoted, conf, "127.0.0.1:" + strconv.Itoa(promoted.MySQLPort) + "/" + promoted.DBName()
}

// TestRealVitessFailover: `failover --tablet` on a keyspace routed by a real Vitess fences
// the old primary's MySQL (its app account locked, on a real MariaDB), tells vtctld the
// promoted tablet is the shard's primary (a real vttablet on MariaDB turns from REPLICA to
// PRIMARY), and stores the promoted primary and tablet at a new generation.
//
// Single-primary shards bound what runs for real: on stock Vitess v0.24.4 and MariaDB a
// replica cannot join a shard that has a primary, so the promoted tablet is the only tablet
// of a shard with no primary in Vitess, and the old primary is a MariaDB outside Vitess.
// What a replica would add (Vitess demoting the old primary's tablet) is not reached.
func TestRealVitessFailover(t *testing.T) {
	c, _, old2, promoted, conf, to := vitessFailover(t, "wrongshard")

	// A tablet of another shard: the old primary of 80- is fenced (that comes first), but
	// vtctld is never asked to reparent and the record does not change; the refusal is for
	// good, so the failover ends failed (not retried forever) and the CLI exits non-zero.
	out, err := vrun(t, "--config", conf, "failover", "app", "--shard", "80-", "--to", to, "--tablet", promoted.Alias, "--wait", "2m")
	require.ErrorContains(t, err, "failover of 80- failed", out)
	require.Contains(t, out, "failed at generation 1 (old primary fenced: true)")
	require.Eventually(t, func() bool {
		out, _ := vrun(t, "--config", conf, "audit", "--machine", "failover")
		return strings.Contains(out, "serves wrongshard/-80")
	}, time.Minute, 100*time.Millisecond, "the wrong shard is refused before any reparent")
	require.True(t, accountLocked(t, old2))
	require.Equal(t, "REPLICA", tabletType(t, c, promoted.Alias))
	out, err = vrun(t, "--config", conf, "map", "show", "app")
	require.NoError(t, err)
	var rec shardmap.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, uint64(1), rec.Generation)
}

// TestRealVitessFailoverRepoints is the failover that succeeds; see TestRealVitessFailover.
func TestRealVitessFailoverRepoints(t *testing.T) {
	c, old1, old2, promoted, conf, to := vitessFailover(t, "repoint")
	vitesstest.Promote(t, promoted) // the promotion outside Vitess that the failover follows

	out, err := vrun(t, "--config", conf, "failover", "app", "--shard", "-80", "--to", to, "--tablet", promoted.Alias, "--wait", "2m")
	require.NoError(t, err, out)
	audit, _ := vrun(t, "--config", conf, "audit", "--machine", "failover")
	require.Contains(t, out, "failover of -80: repointed at generation 2 (old primary fenced: true)", audit)
	require.True(t, accountLocked(t, old1), "the old primary is fenced")
	require.False(t, accountLocked(t, old2), "the other shard's primary is not")
	require.Equal(t, "PRIMARY", tabletType(t, c, promoted.Alias), "Vitess took the promoted tablet as primary")
	require.Contains(t, string(c.MustVtctldclient(t, "GetShard", "repoint/-80")), strconv.Itoa(int(promoted.UID)))

	out, err = vrun(t, "--config", conf, "map", "show", "app")
	require.NoError(t, err)
	var rec shardmap.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, uint64(2), rec.Generation)
	require.Equal(t, uint16(promoted.MySQLPort), rec.Shards[0].Backend.Port)
	require.Equal(t, promoted.Alias, rec.Shards[0].Backend.Tablet)
	require.Equal(t, uint16(old2.Port), rec.Shards[1].Backend.Port)
	out, err = vrun(t, "--config", conf, "audit", "--machine", "failover")
	require.NoError(t, err)
	require.True(t, strings.Contains(out, "FenceOld") && strings.Contains(out, "Reparent") && strings.Contains(out, "failover of -80 ended: repointed"), out)
}

// TestRealVitessLocateAgreesWithVtgate: for rows written through a real vtgate into a
// keyspace of two shards, `locate`'s answer under a record of that keyspace names the shard
// whose MySQL holds the row.
func TestRealVitessLocateAgreesWithVtgate(t *testing.T) {
	c := vitessCluster.Get(t)
	c.CreateKeyspace(t, "placed")
	tablets := c.AddShards(t, "placed", "-80", "80-")
	c.MustVtctldclient(t, "ApplySchema", "--sql", "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY)", "placed")
	c.MustVtctldclient(t, "ApplyVSchema", "--vschema", `{"sharded": true, "vindexes": {"hash": {"type": "hash"}}, "tables": {"t": {"column_vindexes": [{"column": "id", "name": "hash"}]}}}`, "placed")
	g := c.StartVtgate(t, "placed")
	db, err := sql.Open("mysql", g.DSN("placed"))
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := []int64{0, 1, 2, 3, 4, 5, 6, 7, 42, 1000, 1 << 40, -1, -42, 9223372036854775807}
	for _, id := range ids {
		_, err := db.ExecContext(ctx, "INSERT INTO t (id) VALUES (?)", id)
		require.NoError(t, err, "id %d", id)
	}
	be := func(tb *vitesstest.Tablet) shardmap.Backend {
		return shardmap.Backend{Host: "127.0.0.1", Port: uint16(tb.MySQLPort), Database: tb.DBName(), Tablet: tb.Alias}
	}
	rec, err := shardmap.NewVindex("placed", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, shardmap.VindexHash, be(tablets[0]), be(tablets[1]))
	require.NoError(t, err)
	held := map[int64]string{}
	for _, tb := range tablets {
		for _, id := range vitesstest.Ints(t, tb, "SELECT id FROM t") {
			held[id] = tb.Shard
		}
	}
	require.Len(t, held, len(ids))
	for _, id := range ids {
		loc, err := locateIn(rec.Layout, rec.Generation, strconv.FormatInt(id, 10))
		require.NoError(t, err)
		require.Equal(t, held[id], loc.Shard, "id %d: locate says %s, vtgate put it on %s", id, loc.Shard, held[id])
	}
}
