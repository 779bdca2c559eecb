package merge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Vectors measured on PostgreSQL 15 (the header line of each file says how). They pin what
// the naive references in the property tests could share with the package by mistake: the
// display scale of SUM and AVG, AVG's rounding, which of equal values MIN/MAX return, NULL
// handling, and ORDER BY with NULLS FIRST/LAST defaults under COLLATE "C".

func readVectors(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	require.NoError(t, err)
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, strings.Split(line, "\t"))
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, name)
	return out
}

// jsonValues reads a JSON array of values with the protocol's value rules.
func jsonValues(t *testing.T, s string) []Value {
	t.Helper()
	var raws []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(s), &raws), s)
	vals := make([]Value, len(raws))
	for i, raw := range raws {
		v, err := value(raw, "")
		require.NoError(t, err, s)
		vals[i] = v
	}
	return vals
}

// pgText is how the vector files print a value: Postgres's text output, NULL as NULL.
func pgText(v Value) string {
	if v.IsNull() {
		return "NULL"
	}
	if s, ok := v.AsText(); ok {
		return s
	}
	return v.String()
}

// splitInOrder cuts vals into k contiguous shards at random points, keeping their order, so
// that "the last of equal values" means the same thing as in Postgres's scan of the VALUES list.
func splitInOrder(rng *rand.Rand, vals []Value, k int) [][]Row {
	cuts := make([]int, k-1)
	for i := range cuts {
		cuts[i] = rng.IntN(len(vals) + 1)
	}
	slices.Sort(cuts)
	cuts = append(append([]int{0}, cuts...), len(vals))
	shards := make([][]Row, k)
	for s := range shards {
		for _, v := range vals[cuts[s]:cuts[s+1]] {
			shards[s] = append(shards[s], Row{v})
		}
	}
	return shards
}

func TestAggregatesMatchPostgres(t *testing.T) {
	a := Aggregation{Aggs: []Agg{{Func: Count, Col: 0}, {Func: Sum, Col: 0}, {Func: Avg, Col: 0}, {Func: Min, Col: 0}, {Func: Max, Col: 0}}}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, vec := range readVectors(t, "pg_aggregates.tsv") {
		require.Len(t, vec, 7, "line %d", i)
		vals := jsonValues(t, vec[1])
		want := vec[2:]
		for _, k := range []int{1, 2, 3, 5} {
			rows, _, err := Aggregate(a, splitInOrder(rng, vals, k))
			require.NoError(t, err)
			require.Len(t, rows, 1)
			got := make([]string, len(rows[0]))
			for j, v := range rows[0] {
				got[j] = pgText(v)
			}
			require.Equal(t, want, got, "%s %s over %d shards: count, sum, avg, min, max", vec[0], vec[1], k)
		}
	}
}

// parseOrderClause reads the vector file's ORDER BY clauses ("b DESC, a NULLS FIRST") over
// columns a=1, b=2, c=3, d=4, and adds id (column 0) last, as the query did.
func parseOrderClause(t *testing.T, clause string) OrderBy {
	t.Helper()
	var by OrderBy
	for _, part := range strings.Split(clause, ",") {
		words := strings.Fields(part)
		require.NotEmpty(t, words, clause)
		k := Key{Col: strings.Index("_abcd", words[0])}
		require.Positive(t, k.Col, clause)
		rest := strings.Join(words[1:], " ")
		k.Desc = strings.HasPrefix(rest, "DESC")
		switch {
		case strings.HasSuffix(rest, "NULLS FIRST"):
			k.Nulls = NullsFirst
		case strings.HasSuffix(rest, "NULLS LAST"):
			k.Nulls = NullsLast
		}
		by = append(by, k)
	}
	return append(by, Key{Col: 0})
}

func TestOrderMatchesPostgres(t *testing.T) {
	var rows []Row
	var orders [][]string
	for _, vec := range readVectors(t, "pg_order.tsv") {
		switch vec[0] {
		case "row":
			require.Len(t, vec, 6)
			rows = append(rows, jsonValues(t, "["+strings.Join(vec[1:], ",")+"]"))
		case "order":
			require.Len(t, vec, 3)
			orders = append(orders, vec[1:])
		}
	}
	require.NotEmpty(t, rows)
	require.NotEmpty(t, orders)
	for _, o := range orders {
		by := parseOrderClause(t, o[0])
		want := strings.Split(o[1], ",")
		for _, k := range []int{1, 3, 4} {
			shards := make([][]Row, k)
			for _, r := range rows {
				id, _ := r[0].AsInt64()
				shards[id%int64(k)] = append(shards[id%int64(k)], r)
			}
			for _, s := range shards {
				slices.SortStableFunc(s, by.Compare)
			}
			for _, l := range []Limit{{Count: All}, {Count: 10, Offset: 5}, {Count: 7, Offset: 0}} {
				res, err := Merge(shards, by, l)
				require.NoError(t, err)
				got := make([]string, len(res.Rows))
				for i, r := range res.Rows {
					got[i] = r[0].String()
				}
				end := len(want)
				if l.Count >= 0 {
					end = min(end, int(l.Offset+l.Count))
				}
				require.Equal(t, want[l.Offset:end], got, "ORDER BY %s, id %s over %d shards", o[0], l, k)
			}
		}
	}
}

// TestVectorFilesNameTheirSource keeps the header the brief requires on every vector file.
func TestVectorFilesNameTheirSource(t *testing.T) {
	for _, name := range []string{"pg_aggregates.tsv", "pg_order.tsv"} {
		b, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		first, _, _ := bytes.Cut(b, []byte("\n"))
		require.True(t, strings.HasPrefix(string(first), "# source: PostgreSQL "), "%s: %s", name, first)
		require.Contains(t, string(first), "PostgreSQL Licence", name)
		require.NotContains(t, string(b), "/work/", name)
	}
}
