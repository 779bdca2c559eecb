package mysql_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/kernel/vindex"
)

// TestRealChecksum compares Checksum's shard selection with the keyspace IDs kernel/vindex
// computes and the keyspace-ID partition kernel/keyrange looks them up in, for each vindex
// and key type a Vitess keyspace uses; then what a row's encoding must tell apart, and the
// errors.
func TestRealChecksum(t *testing.T) {
	s := my.Get(t)
	ctx := t.Context()
	u := newEnvDB(t, s)
	b := openBackend(t, s, s.RootDSN(u.db), "")

	type keyCol struct {
		sqlType string
		gen     func(i int) string // the key's SQL literal for row i
		key     shardmap.KeyType
		kinds   []shardmap.VindexKind
		ksid    map[shardmap.VindexKind]func(text string) [8]byte
	}
	cols := map[string]keyCol{
		"bigint": {"bigint", func(i int) string { return strconv.FormatInt(int64(i)*2654435761-5000000000, 10) }, shardmap.Bigint,
			[]shardmap.VindexKind{shardmap.VindexHash, shardmap.VindexXXHash}, map[shardmap.VindexKind]func(string) [8]byte{
				shardmap.VindexHash:   func(x string) [8]byte { v, _ := strconv.ParseInt(x, 10, 64); return vindex.Hash(uint64(v)) },
				shardmap.VindexXXHash: func(x string) [8]byte { v, _ := strconv.ParseInt(x, 10, 64); return vindex.XXHashInt64(v) },
			}},
		// BIGINT UNSIGNED beyond int64: Vitess hashes the number's text (the record names it text).
		"unsigned": {"bigint unsigned", func(i int) string { return strconv.FormatUint(uint64(i)*0x9e3779b97f4a7c15, 10) }, shardmap.Text,
			[]shardmap.VindexKind{shardmap.VindexHash}, map[shardmap.VindexKind]func(string) [8]byte{
				shardmap.VindexHash: func(x string) [8]byte { k, _ := vindex.HashText(x); return k },
			}},
		"varchar": {"varchar(64)", func(i int) string { return fmt.Sprintf("'user-%d-é'", i*7919) }, shardmap.Text,
			[]shardmap.VindexKind{shardmap.VindexXXHash}, map[shardmap.VindexKind]func(string) [8]byte{
				shardmap.VindexXXHash: vindex.XXHashString,
			}},
	}
	for name, c := range cols {
		table := "vx_" + name
		var values []string
		for i := 1; i <= 300; i++ {
			values = append(values, fmt.Sprintf("(%s, 'row %d')", c.gen(i), i))
		}
		adminExec(t, s, u.db, fmt.Sprintf("CREATE TABLE %s (k %s, v text)", table, c.sqlType),
			fmt.Sprintf("INSERT INTO %s VALUES %s", table, strings.Join(values, ", ")))
		keys := readKeys(t, s, u.db, table)
		for _, kind := range c.kinds {
			for _, n := range []int{2, 3, 4} {
				ranges, err := keyrange.Split(keyrange.Full(), n)
				require.NoError(t, err)
				part, err := keyrange.NewPartition(ranges)
				require.NoError(t, err)
				scheme := shardmap.Vindex{Key: shardmap.Key{Column: "k", Type: c.key}, Kind: kind, Ranges: ranges}
				var total uint64
				for shard := range n {
					var mine []string
					for _, k := range keys {
						if part.Lookup(c.ksid[kind](k)) == shard {
							mine = append(mine, "'"+k+"'")
						}
					}
					want := fmt.Sprintf("%s_%v_%d_%d", table, kind, n, shard)
					adminExec(t, s, u.db, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM %s WHERE k IN (%s)", want, table, strings.Join(append(mine, "NULL"), ", ")))
					wd, err := b.Checksum(ctx, want, adapters.ShardFn{})
					require.NoError(t, err)
					got, err := b.Checksum(ctx, table, adapters.ShardFn{Scheme: scheme, Shard: uint32(shard)})
					require.NoError(t, err)
					require.Equal(t, uint64(len(mine)), got.Rows, "%s under %v over %d: shard %d", name, kind, n, shard)
					require.Equal(t, wd.Sum, got.Sum, "%s under %v over %d: shard %d: Checksum's rows and the vindex's differ", name, kind, n, shard)
					total += got.Rows
				}
				require.EqualValues(t, 300, total)
			}
		}
	}

	t.Run("NULL is not empty", func(t *testing.T) {
		for _, mutant := range []string{"", "checksum-null-is-empty"} {
			mb := openBackend(t, s, s.RootDSN(u.db), mutant)
			adminExec(t, s, u.db, "CREATE TABLE IF NOT EXISTS n_null (id bigint, v text)", "CREATE TABLE IF NOT EXISTS n_empty (id bigint, v text)",
				"DELETE FROM n_null", "DELETE FROM n_empty", "INSERT INTO n_null VALUES (1, NULL)", "INSERT INTO n_empty VALUES (1, '')")
			a, err := mb.Checksum(ctx, "n_null", adapters.ShardFn{})
			require.NoError(t, err)
			e, err := mb.Checksum(ctx, "n_empty", adapters.ShardFn{})
			require.NoError(t, err)
			if mutant == "" {
				require.NotEqual(t, a.Sum, e.Sum, "a NULL and an empty string are different rows")
			} else {
				require.Equal(t, a.Sum, e.Sum, "mutant %s", mutant)
			}
		}
	})

	t.Run("column types and the session time zone", func(t *testing.T) {
		adminExec(t, s, u.db, `CREATE TABLE typed (ts timestamp(3) NULL, dt datetime, d decimal(20,6), f double, j json, bl blob, bt bit(10), e enum('a','b'))`,
			`INSERT INTO typed VALUES ('2024-02-29 12:34:56.789', '2024-02-29 12:34:56', 123456.000001, 1.0e-7, '{"a": [1, 2]}', X'00ff', b'1010101010', 'b'),
			(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`,
			"CREATE TABLE typed_rev LIKE typed", "INSERT INTO typed_rev SELECT * FROM typed ORDER BY ts IS NULL DESC")
		other, err := mysqlad.Open(ctx, s.RootDSN(u.db)+"&time_zone=%27%2B05%3A00%27", mysqlad.Options{})
		require.NoError(t, err)
		defer other.Close()
		a, err := b.Checksum(ctx, "typed", adapters.ShardFn{})
		require.NoError(t, err)
		z, err := other.Checksum(ctx, "typed", adapters.ShardFn{})
		require.NoError(t, err)
		require.Equal(t, a, z, "the DSN's time zone does not change how TIMESTAMPs print for the checksum")
		r, err := b.Checksum(ctx, "typed_rev", adapters.ShardFn{})
		require.NoError(t, err)
		require.Equal(t, a.Sum, r.Sum)
		adminExec(t, s, u.db, "UPDATE typed_rev SET ts = ts + INTERVAL 1 SECOND WHERE ts IS NOT NULL")
		r, err = b.Checksum(ctx, "typed_rev", adapters.ShardFn{})
		require.NoError(t, err)
		require.NotEqual(t, a.Sum, r.Sum, "a second's difference is a different row")
	})

	t.Run("quoted names", func(t *testing.T) {
		adminExec(t, s, "", "CREATE DATABASE `odd``db`", "CREATE TABLE `odd``db`.`t b` (`k``ey` bigint, v text)",
			"INSERT INTO `odd``db`.`t b` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
		ranges, _ := keyrange.Split(keyrange.Full(), 2)
		scheme := shardmap.Vindex{Key: shardmap.Key{Column: "k`ey", Type: shardmap.Bigint, Tables: []string{"t b"}}, Kind: shardmap.VindexHash, Ranges: ranges}
		var total uint64
		for shard := range uint32(2) {
			d, err := b.Checksum(ctx, "odd`db.t b", adapters.ShardFn{Scheme: scheme, Shard: shard})
			require.NoError(t, err)
			total += d.Rows
		}
		require.EqualValues(t, 3, total)
		_, err := b.Checksum(ctx, "t b`; DROP TABLE items; --", adapters.ShardFn{})
		require.Equal(t, mysqlad.CodeNoSuchTable, mysqlad.Code(err), "%v", err)
		require.Equal(t, "0", s.QueryString(t, "SELECT COUNT(*) FROM "+mysqlad.QuoteIdent(u.db)+".items"), "items is still there")
	})

	t.Run("errors", func(t *testing.T) {
		ranges, _ := keyrange.Split(keyrange.Full(), 2)
		hash := shardmap.Vindex{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint}, Kind: shardmap.VindexHash, Ranges: ranges}
		_, err := b.Checksum(ctx, "vx_bigint", adapters.ShardFn{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint}, Shards: 2}})
		require.ErrorContains(t, err, "vindex scheme")
		_, err = b.Checksum(ctx, "vx_bigint", adapters.ShardFn{Scheme: hash, Shard: 2})
		require.ErrorContains(t, err, "has 2 shards")
		_, err = b.Checksum(ctx, "vx_varchar", adapters.ShardFn{Scheme: hash})
		require.ErrorContains(t, err, "no single shard", "text keys read under a bigint key type are refused, not routed by a guess")
		adminExec(t, s, u.db, "CREATE TABLE nullkey (k bigint, v text)", "INSERT INTO nullkey VALUES (1, 'a'), (NULL, 'b')")
		_, err = b.Checksum(ctx, "nullkey", adapters.ShardFn{Scheme: hash})
		require.ErrorContains(t, err, "key k = NULL")
		other := hash
		other.Key.Tables = []string{"elsewhere"}
		_, err = b.Checksum(ctx, "vx_bigint", adapters.ShardFn{Scheme: other})
		require.ErrorContains(t, err, "not among the scheme's sharded tables")
		_, err = b.Checksum(ctx, "a.b.c", adapters.ShardFn{})
		require.ErrorContains(t, err, "database.name")
		_, err = b.Checksum(ctx, "no_such_table", adapters.ShardFn{})
		var be *adapters.BackendError
		require.ErrorAs(t, err, &be)
		require.Equal(t, mysqlad.CodeNoSuchTable, be.Code)
	})
}

// readKeys reads a table's k column as the server prints it.
func readKeys(t *testing.T, s interface {
	DSN(user, password, database string) string
}, db, table string) []string {
	t.Helper()
	conn := openSQL(t, s.DSN("root", "", db))
	rows, err := conn.QueryContext(t.Context(), "SELECT k FROM "+mysqlad.QuoteIdent(table))
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		out = append(out, k)
	}
	require.NoError(t, rows.Err())
	return out
}
