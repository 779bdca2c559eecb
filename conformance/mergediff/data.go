package mergediff

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"loam.dev/router/kernel/pghash"
)

// Table is the table every query reads.
const Table = "t"

// Columns are the table's columns, in order; queries address them by index.
var Columns = []string{"id", "a", "b", "c", "d", "g", "i"}

// Column indexes.
const (
	ColID = iota // int8, unique, the shard key
	ColA         // int8, few distinct values, NULLs
	ColB         // text COLLATE "C", NULLs
	ColC         // numeric of mixed display scales, NULLs
	ColD         // bool, NULLs
	ColG         // text COLLATE "C", four values, NULLs: a group key
	ColI         // int4 with extremes, NULLs
)

// Schema creates the table.
const Schema = `CREATE TABLE t (id int8 NOT NULL, a int8, b text COLLATE "C", c numeric, d bool, g text COLLATE "C", i int4)`

// Row is one row of the table, each column as an SQL literal ("NULL" for NULL).
type Row [7]string

var (
	texts    = []string{"", "a", "A", "b", "B", "ab", "a b", "Z", "é", "É", "日本", "10", "9", "~", "it's"}
	decimals = []string{"0", "1", "1.0", "1.50", "1.5", "-0.125", "2.25", "100.0", "-3", "0.001", "12345678901234567890.5", "-7.75"}
	groups   = []string{"w", "x", "y", "z"}
	extremes = []int64{2147483647, -2147483648, 2147483646}
)

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func maybe(rng *rand.Rand, nullPct int, f func() string) string {
	if rng.IntN(100) < nullPct {
		return "NULL"
	}
	return f()
}

// Rows returns n rows drawn from rng, with unique ids spread over the whole int8 range (the
// shard key: every shard gets rows) and many ties and NULLs in the other columns.
func Rows(rng *rand.Rand, n int) []Row {
	seen := map[int64]bool{}
	out := make([]Row, 0, n)
	for len(out) < n {
		id := int64(rng.Uint64())
		if rng.IntN(4) == 0 {
			id = rng.Int64N(2000) - 1000
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, Row{
			strconv.FormatInt(id, 10),
			maybe(rng, 15, func() string { return strconv.FormatInt(rng.Int64N(21)-10, 10) }),
			maybe(rng, 15, func() string { return quote(texts[rng.IntN(len(texts))]) }),
			maybe(rng, 15, func() string { return decimals[rng.IntN(len(decimals))] }),
			maybe(rng, 15, func() string { return []string{"false", "true"}[rng.IntN(2)] }),
			maybe(rng, 10, func() string { return quote(groups[rng.IntN(len(groups))]) }),
			maybe(rng, 10, func() string {
				if rng.IntN(8) == 0 {
					return strconv.FormatInt(extremes[rng.IntN(len(extremes))], 10)
				}
				return strconv.FormatInt(rng.Int64N(2_000_001)-1_000_000, 10)
			}),
		})
	}
	return out
}

// ID is the row's shard key.
func (r Row) ID() int64 {
	id, err := strconv.ParseInt(r[ColID], 10, 64)
	if err != nil {
		panic(fmt.Sprintf("mergediff: row id %q: %v", r[ColID], err))
	}
	return id
}

// Split returns the rows of each of n shards, chosen by the routing function (Postgres hash
// partitioning of the int8 id, as PgDog routes).
func Split(rows []Row, n int) [][]Row {
	out := make([][]Row, n)
	for _, r := range rows {
		s := pghash.ShardOfInt8(r.ID(), uint64(n))
		out[s] = append(out[s], r)
	}
	return out
}

// Inserts returns INSERT statements loading rows, batch rows each.
func Inserts(rows []Row, batch int) []string {
	var out []string
	for start := 0; start < len(rows); start += batch {
		var b strings.Builder
		b.WriteString("INSERT INTO t (id, a, b, c, d, g, i) VALUES ")
		for j, r := range rows[start:min(start+batch, len(rows))] {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + strings.Join(r[:], ", ") + ")")
		}
		out = append(out, b.String())
	}
	return out
}
