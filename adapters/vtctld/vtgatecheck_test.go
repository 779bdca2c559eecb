package vtctld_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/vitesstest"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
)

// TestRealVtgateCheck: the Vitess cutover's check after the switch (driver.VtgateCheck),
// through a real vtgate. Rows written through vtgate into a keyspace of two shards pass
// under the record of that keyspace. A row put straight into -80's MySQL whose key the
// record locates on 80- (what a reshard that put rows on the wrong shard would leave) fails
// it with ErrVerifyFailed, naming the row; so does a record whose shards are the other way
// round. A shard vtgate does not know is an error that is not the verdict (the machine asks
// again).
func TestRealVtgateCheck(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "checked")
	tablets := c.AddShards(t, "checked", "-80", "80-")
	c.MustVtctldclient(t, "ApplySchema", "--sql", vitesstest.WriterSchema, "checked")
	c.MustVtctldclient(t, "ApplyVSchema", "--vschema", vitesstest.WriterVSchema, "checked")
	g := c.StartVtgate(t, "checked")
	ks, err := sql.Open("mysql", g.DSN("checked"))
	require.NoError(t, err)
	defer ks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, vitesstest.NewWriter(ks).Preload(ctx, 200))

	be := func(tb *vitesstest.Tablet) shardmap.Backend {
		return shardmap.Backend{Host: "127.0.0.1", Port: uint16(tb.MySQLPort), Database: tb.DBName(), Tablet: tb.Alias}
	}
	rec, err := shardmap.NewVindex("checked", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, shardmap.VindexHash, be(tablets[0]), be(tablets[1]))
	require.NoError(t, err)
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = g.User, g.Password, "tcp", "127.0.0.1:"+strconv.Itoa(g.MySQLPort)
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	gate := sql.OpenDB(conn)
	defer gate.Close()
	check := func(r *shardmap.Record) driver.VtgateCheck {
		return driver.VtgateCheck{DB: gate, Record: func(context.Context) (*shardmap.Record, error) { return r, nil }}
	}
	require.NoError(t, check(rec).Verify(ctx, "checked", []string{"-80", "80-"}), "rows vtgate placed are where the record locates them")

	swapped := rec.Clone()
	swapped.Shards[0].Name, swapped.Shards[1].Name = "80-", "-80"
	err = check(swapped).Verify(ctx, "checked", []string{"-80", "80-"})
	require.ErrorIs(t, err, driver.ErrVerifyFailed)

	// A row of 80- put straight into -80's MySQL.
	var stray int64
	for id := int64(1_000_000); ; id++ {
		if loc, _ := rec.Layout.Locate(strconv.FormatInt(id, 10)); loc.Name == "80-" {
			stray = id
			break
		}
	}
	raw, err := sql.Open("mysql", tablets[0].DSN(tablets[0].DBName()))
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.ExecContext(ctx, "INSERT INTO t (id, v) VALUES (?, 'stray')", stray)
	require.NoError(t, err)
	err = check(rec).Verify(ctx, "checked", []string{"-80", "80-"})
	require.ErrorIs(t, err, driver.ErrVerifyFailed)
	require.ErrorContains(t, err, "id = "+strconv.FormatInt(stray, 10)+" is on shard -80")

	err = check(rec).Verify(ctx, "checked", []string{"c0-"})
	require.Error(t, err)
	require.NotErrorIs(t, err, driver.ErrVerifyFailed, "a shard vtgate cannot serve is asked again, not a verdict")
}
