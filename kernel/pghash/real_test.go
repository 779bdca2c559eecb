package pghash_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/pghash"
)

// keysPerType is how many random keys each partitioned table receives.
const keysPerType = 10_000

// moduli are the partition counts compared.
var moduli = []uint64{2, 3, 4, 8, 16, 64}

// testSeed is the seed of every random input here: LOAM_TEST_SEED if set (to replay a
// failure), else the clock. Every failure message names it.
func testSeed(t *testing.T) uint64 {
	if s := os.Getenv("LOAM_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "LOAM_TEST_SEED")
		return v
	}
	return uint64(time.Now().UnixNano())
}

// TestRealPostgres compares pghash with a real Postgres: where PARTITION BY HASH tables route
// random keys, what its extended hash functions return, and what its input functions accept.
// One server serves every subtest.
func TestRealPostgres(t *testing.T) {
	s := pgtest.Start(t)
	s.CreateDatabase(t, "hashdiff")
	conn := s.Connect(t, "hashdiff")
	seed := testSeed(t)
	t.Logf("seed %d (replay with LOAM_TEST_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ctx := context.Background()
	exec := func(t *testing.T, sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s (seed %d)", sql, seed)
	}

	t.Run("partition routing", func(t *testing.T) {
		for _, typ := range []string{"int8", "int4", "text", "uuid"} {
			keys := randomKeys(rng, typ, keysPerType)
			exec(t, fmt.Sprintf("CREATE TABLE keys_%s (k %s)", typ, typ))
			n, err := conn.CopyFrom(ctx, pgx.Identifier{"keys_" + typ}, []string{"k"}, pgx.CopyFromRows(keys))
			require.NoError(t, err)
			require.EqualValues(t, len(keys), n)
			for _, m := range moduli {
				table := fmt.Sprintf("pt_%s_%d", typ, m)
				exec(t, fmt.Sprintf("CREATE TABLE %s (k %s) PARTITION BY HASH (k)", table, typ))
				for r := range m {
					exec(t, fmt.Sprintf("CREATE TABLE %s_%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)", table, r, table, m, r))
				}
				exec(t, fmt.Sprintf("INSERT INTO %s SELECT k FROM keys_%s", table, typ))
				checked := checkRouting(t, conn, table, typ, m, seed)
				require.Equal(t, len(keys), checked, "%s: rows read back", table)
			}
		}
	})

	t.Run("NULL and multi-column keys", func(t *testing.T) {
		const m = 7
		exec(t, "CREATE TABLE mc (a int8, b text, c uuid) PARTITION BY HASH (a, b, c)")
		for r := range m {
			exec(t, fmt.Sprintf("CREATE TABLE mc_%d PARTITION OF mc FOR VALUES WITH (MODULUS %d, REMAINDER %d)", r, m, r))
		}
		var rows [][]any
		for i := range 2000 {
			a, b, c := any(rng.Int64()), any(randomText(rng)), any(randomUUID(rng))
			// Every combination of NULL columns, including all three.
			if i&1 != 0 {
				a = nil
			}
			if i&2 != 0 {
				b = nil
			}
			if i&4 != 0 {
				c = nil
			}
			rows = append(rows, []any{a, b, c})
		}
		_, err := conn.CopyFrom(ctx, pgx.Identifier{"mc"}, []string{"a", "b", "c"}, pgx.CopyFromRows(rows))
		require.NoError(t, err)
		got, err := conn.Query(ctx, "SELECT a, b, c, tableoid::regclass::text FROM mc")
		require.NoError(t, err)
		count := 0
		for got.Next() {
			var a *int64
			var b *string
			var c pgtype.UUID
			var part string
			require.NoError(t, got.Scan(&a, &b, &c, &part))
			var row pghash.Row
			if a != nil {
				row.Int8(*a)
			} else {
				row.Null()
			}
			if b != nil {
				row.Text(*b)
			} else {
				row.Null()
			}
			if c.Valid {
				row.UUID(c.Bytes)
			} else {
				row.Null()
			}
			require.Equal(t, part, fmt.Sprintf("mc_%d", row.Remainder(m)), "(%v, %v, %v) seed %d", a, b, c, seed)
			count++
		}
		require.NoError(t, got.Err())
		require.Equal(t, len(rows), count)
	})

	t.Run("extended hash functions", func(t *testing.T) {
		exec(t, "CREATE FUNCTION bytea_hash_extended(bytea, int8) RETURNS int8 LANGUAGE internal STRICT IMMUTABLE AS 'hashvarlenaextended'")
		const n = 10_000
		seeds := make([]int64, n)
		for i := range seeds {
			switch i % 4 {
			case 0:
				seeds[i] = int64(pghash.HashPartitionSeed)
			case 1:
				seeds[i] = int64(rng.IntN(3)) // 0 skips the seeding step
			default:
				seeds[i] = rng.Int64()
			}
		}
		ints, texts, uuids, blobs := make([]int64, n), make([]string, n), make([][16]byte, n), make([][]byte, n)
		for i := range n {
			ints[i] = randomInt64(rng)
			texts[i] = randomText(rng)
			uuids[i] = randomUUID(rng)
			blobs[i] = []byte(randomText(rng))
		}
		compare := func(name, sql string, arg any, ours func(i int, seed uint64) uint64) {
			t.Helper()
			rows, err := conn.Query(ctx, sql, arg, seeds)
			require.NoError(t, err)
			i := 0
			for rows.Next() {
				var h int64
				require.NoError(t, rows.Scan(&h))
				require.Equal(t, h, int64(ours(i, uint64(seeds[i]))), "%s input #%d seed %d (test seed %d)", name, i, seeds[i], seed)
				i++
			}
			require.NoError(t, rows.Err())
			require.Equal(t, n, i, name)
		}
		const q = "SELECT %s(v, s) FROM unnest($1::%s[], $2::int8[]) WITH ORDINALITY AS x(v, s, o) ORDER BY o"
		compare("hashint8extended", fmt.Sprintf(q, "hashint8extended", "int8"), ints,
			func(i int, s uint64) uint64 { return pghash.HashInt8Extended(ints[i], s) })
		int4s := make([]int32, n)
		for i := range int4s {
			int4s[i] = int32(ints[i])
		}
		compare("hashint4extended", fmt.Sprintf(q, "hashint4extended", "int4"), int4s,
			func(i int, s uint64) uint64 { return pghash.HashInt4Extended(int4s[i], s) })
		compare("hashtextextended", fmt.Sprintf(q, "hashtextextended", "text"), texts,
			func(i int, s uint64) uint64 { return pghash.HashTextExtended(texts[i], s) })
		uuidArgs := make([]pgtype.UUID, n)
		for i, u := range uuids {
			uuidArgs[i] = pgtype.UUID{Bytes: u, Valid: true}
		}
		compare("uuid_hash_extended", fmt.Sprintf(q, "uuid_hash_extended", "uuid"), uuidArgs,
			func(i int, s uint64) uint64 { return pghash.HashUUIDExtended(uuids[i], s) })
		compare("hashvarlenaextended", fmt.Sprintf(q, "bytea_hash_extended", "bytea"), blobs,
			func(i int, s uint64) uint64 { return pghash.HashBytesExtended(blobs[i], s) })
	})

	t.Run("input functions", func(t *testing.T) {
		exec(t, `CREATE FUNCTION try_cast(txt text, typ text) RETURNS text LANGUAGE plpgsql AS $$
			DECLARE r text;
			BEGIN
				EXECUTE format('SELECT %L::%s::text', txt, typ) INTO r;
				RETURN r;
			EXCEPTION WHEN others THEN
				RETURN 'ERR:' || SQLSTATE;
			END $$`)
		for _, typ := range []pghash.Type{pghash.TypeUUID, pghash.TypeInt8, pghash.TypeInt4, pghash.TypeInt2} {
			inputs := make([]string, 3000)
			for i := range inputs {
				if typ == pghash.TypeUUID {
					inputs[i] = randomUUIDText(rng)
				} else {
					inputs[i] = randomIntText(rng)
				}
			}
			rows, err := conn.Query(ctx, "SELECT try_cast(v, $2) FROM unnest($1::text[]) WITH ORDINALITY AS x(v, o) ORDER BY o", inputs, typ.String())
			require.NoError(t, err)
			var results []string
			for rows.Next() {
				var r string
				require.NoError(t, rows.Scan(&r))
				results = append(results, r)
			}
			require.NoError(t, rows.Err())
			require.Len(t, results, len(inputs))
			accepted := 0
			for i, in := range inputs {
				row, err := pghash.ParseKey(typ, in)
				at := fmt.Sprintf("%v input %q: Postgres says %q, ours %v (seed %d)", typ, in, results[i], err, seed)
				switch results[i] {
				case "ERR:22P02":
					require.ErrorIs(t, err, pghash.ErrSyntax, at)
				case "ERR:22003":
					require.ErrorIs(t, err, pghash.ErrOutOfRange, at)
				default:
					require.False(t, strings.HasPrefix(results[i], "ERR:"), at)
					require.NoError(t, err, at)
					want, err := pghash.ParseKey(typ, results[i]) // the canonical output form
					require.NoError(t, err, at)
					require.Equal(t, want, row, at)
					accepted++
				}
			}
			require.Greater(t, accepted, len(inputs)/10, "%v: too few valid inputs to compare", typ)
		}
	})
}

// checkRouting reads every row of a hash-partitioned table with the partition it was routed
// to and compares that with pghash's shard of the key. It returns the rows checked.
func checkRouting(t *testing.T, conn *pgx.Conn, table, typ string, m uint64, seed uint64) int {
	t.Helper()
	rows, err := conn.Query(context.Background(), fmt.Sprintf("SELECT k, tableoid::regclass::text FROM %s", table))
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var part string
		var shard uint64
		var key any
		switch typ {
		case "int8":
			var k int64
			require.NoError(t, rows.Scan(&k, &part))
			shard, key = pghash.ShardOfInt8(k, m), k
		case "int4":
			var k int32
			require.NoError(t, rows.Scan(&k, &part))
			shard, key = pghash.ShardOfInt4(k, m), k
			require.Equal(t, pghash.ShardOfInt8(int64(k), m), shard)
		case "text":
			var k string
			require.NoError(t, rows.Scan(&k, &part))
			shard, key = pghash.ShardOfText(k, m), k
		case "uuid":
			var k pgtype.UUID
			require.NoError(t, rows.Scan(&k, &part))
			shard, key = pghash.ShardOfUUID(k.Bytes, m), pghash.FormatUUID(k.Bytes)
		}
		require.Equal(t, fmt.Sprintf("%s_%d", table, shard), part, "%s key %v (seed %d)", typ, key, seed)
		n++
	}
	require.NoError(t, rows.Err())
	return n
}

func randomKeys(rng *rand.Rand, typ string, n int) [][]any {
	keys := make([][]any, n)
	for i := range keys {
		switch typ {
		case "int8":
			keys[i] = []any{randomInt64(rng)}
		case "int4":
			keys[i] = []any{int32(randomInt64(rng))}
		case "text":
			keys[i] = []any{randomText(rng)}
		case "uuid":
			keys[i] = []any{pgtype.UUID{Bytes: randomUUID(rng), Valid: true}}
		}
	}
	return keys
}

// randomInt64 mixes uniform draws with the edges: small numbers, ±2^31 and ±2^32
// neighbourhoods (where the int8 fold changes), and the extremes.
func randomInt64(rng *rand.Rand) int64 {
	switch rng.IntN(4) {
	case 0:
		return rng.Int64N(2001) - 1000
	case 1:
		edge := []int64{1 << 31, 1 << 32, math.MaxInt64, math.MinInt64}[rng.IntN(4)]
		v := edge + rng.Int64N(7) - 3
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	default:
		return int64(rng.Uint64())
	}
}

// randomText is valid UTF-8 without NUL (which text cannot hold), of every length up to 40
// bytes and beyond, ASCII-heavy but with 2-, 3- and 4-byte sequences.
func randomText(rng *rand.Rand) string {
	var b []byte
	n := rng.IntN(40)
	if rng.IntN(10) == 0 {
		n = rng.IntN(300)
	}
	for len(b) < n {
		var r rune
		switch rng.IntN(8) {
		case 0:
			r = rune(0x80 + rng.IntN(0x800-0x80))
		case 1:
			r = rune(0x800 + rng.IntN(0xd800-0x800))
		case 2:
			r = rune(0x10000 + rng.IntN(0x10ffff-0x10000))
		default:
			r = rune(1 + rng.IntN(0x7f))
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

func randomUUID(rng *rand.Rand) [16]byte {
	var u [16]byte
	for i := range u {
		u[i] = byte(rng.Uint32())
	}
	return u
}

// randomUUIDText is a uuid in some accepted form, often mangled.
func randomUUIDText(rng *rand.Rand) string {
	digits := strings.ReplaceAll(pghash.FormatUUID(randomUUID(rng)), "-", "")
	var b strings.Builder
	for g := range 8 {
		chunk := digits[4*g : 4*g+4]
		if rng.IntN(3) == 0 {
			chunk = strings.ToUpper(chunk)
		}
		b.WriteString(chunk)
		if g < 7 && rng.IntN(2) == 0 {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if rng.IntN(4) == 0 {
		s = "{" + s + "}"
	}
	return mangle(rng, s, "-{} g0\t")
}

// randomIntText is an integer's text in a form Postgres may or may not accept.
func randomIntText(rng *rand.Rand) string {
	var s string
	switch rng.IntN(3) {
	case 0:
		s = strconv.FormatInt(randomInt64(rng), 10)
	case 1:
		s = strconv.FormatInt(rng.Int64N(1<<17)-(1<<16), 10)
	default:
		s = strconv.FormatUint(rng.Uint64(), 10) + strconv.Itoa(rng.IntN(100)) // often out of range
	}
	if rng.IntN(3) == 0 {
		s = []string{" ", "\t", "\n", "+", "  "}[rng.IntN(5)] + s
	}
	if rng.IntN(3) == 0 {
		s += []string{" ", "\t\n", "x", ".0", "e1"}[rng.IntN(5)]
	}
	return mangle(rng, s, " +-x0")
}

// mangle replaces, inserts or deletes one byte in a third of the inputs.
func mangle(rng *rand.Rand, s, alphabet string) string {
	if rng.IntN(3) != 0 || s == "" {
		return s
	}
	i := rng.IntN(len(s))
	c := string(alphabet[rng.IntN(len(alphabet))])
	switch rng.IntN(3) {
	case 0:
		return s[:i] + c + s[i+1:]
	case 1:
		return s[:i] + c + s[i:]
	default:
		return s[:i] + s[i+1:]
	}
}
