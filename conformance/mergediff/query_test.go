package mergediff

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/merge"
)

func dec(t *testing.T, s string) merge.Value {
	v, err := merge.ParseDecimal(s)
	require.NoError(t, err)
	return v
}

// row makes a table row with id and a set, the rest NULL.
func row(id int64, a merge.Value) merge.Row {
	return merge.Row{merge.Int(id), a, merge.Null(), merge.Null(), merge.Null(), merge.Null(), merge.Null()}
}

func TestCheckTies(t *testing.T) {
	byA := Query{Order: merge.OrderBy{{Col: ColA}}, Limit: merge.Limit{Count: 2, Offset: 1}}
	require.True(t, byA.NeedsFull())
	full := []merge.Row{row(1, merge.Int(0)), row(2, merge.Int(5)), row(3, merge.Int(5)), row(4, merge.Int(5)), row(5, merge.Int(9))}
	want := []merge.Row{row(2, merge.Int(5)), row(3, merge.Int(5))}
	require.NoError(t, byA.Check(want, want, full))
	require.NoError(t, byA.Check(want, []merge.Row{row(4, merge.Int(5)), row(2, merge.Int(5))}, full),
		"a window cutting a run of ties may hold any of its rows, in any order")
	require.ErrorContains(t, byA.Check(want, []merge.Row{row(4, merge.Int(5)), row(4, merge.Int(5))}, full), "not among",
		"a row twice is more often than the unsharded answer has it")
	require.ErrorContains(t, byA.Check(want, []merge.Row{row(1, merge.Int(5)), row(2, merge.Int(5))}, full), "not among")
	require.ErrorContains(t, byA.Check(want, []merge.Row{row(1, merge.Int(0)), row(2, merge.Int(5))}, full), "sorts as")
	require.ErrorContains(t, byA.Check(want, want[:1], full), "1 rows, want 2")

	whole := Query{Order: merge.OrderBy{{Col: ColA}}, Limit: merge.Limit{Count: merge.All}}
	require.False(t, whole.NeedsFull())
	require.NoError(t, whole.Check(full, []merge.Row{full[0], full[3], full[1], full[2], full[4]}, nil),
		"without a window, ties may come in any order")
	require.ErrorContains(t, whole.Check(full, []merge.Row{full[0], full[3], full[1], row(6, merge.Int(5)), full[4]}, nil), "not among")

	total := Query{Order: merge.OrderBy{{Col: ColA}, {Col: ColID}}, Limit: merge.Limit{Count: merge.All}}
	require.True(t, total.Total())
	require.ErrorContains(t, total.Check(full, []merge.Row{full[0], full[2], full[1], full[3], full[4]}, nil), "row 1",
		"a total order is compared exactly")
}

func TestCheckDisplay(t *testing.T) {
	agg := Query{Agg: &merge.Aggregation{Aggs: []merge.Agg{{Func: merge.Sum, Col: ColC}, {Func: merge.Max, Col: ColC}}}}
	want := []merge.Row{{dec(t, "3.50"), dec(t, "1.0")}}
	require.NoError(t, agg.Check(want, []merge.Row{{dec(t, "3.50"), dec(t, "1.00")}}, nil),
		"MAX among equal numbers of different scale is compared by value")
	require.ErrorContains(t, agg.Check(want, []merge.Row{{dec(t, "3.5"), dec(t, "1.0")}}, nil), "row 0",
		"SUM's display scale must match")
	require.Error(t, agg.Check(want, []merge.Row{{merge.Text("3.50"), dec(t, "1.0")}}, nil))
	require.Error(t, agg.Check(want, []merge.Row{{merge.Null(), dec(t, "1.0")}}, nil))
}

func TestDecode(t *testing.T) {
	cases := []struct {
		oid  uint32
		raw  []byte
		want string
	}{
		{oidBool, []byte("t"), "true"},
		{oidBool, []byte("f"), "false"},
		{oidInt8, []byte("-9223372036854775808"), "-9223372036854775808"},
		{oidInt4, []byte("7"), "7"},
		{oidNumeric, []byte("1.50"), "1.50"},
		{oidNumeric, []byte("-23956323693855689728"), "-23956323693855689728"},
		{oidText, []byte("日本"), `"日本"`},
		{oidText, nil, "null"},
		{oidText, []byte{}, `""`},
	}
	for _, c := range cases {
		v, err := Decode(c.oid, c.raw)
		require.NoError(t, err)
		require.Equal(t, c.want, v.String())
	}
	for _, bad := range []struct {
		oid uint32
		raw string
	}{{oidBool, "true"}, {oidInt8, "1.5"}, {oidNumeric, "NaN"}, {oidNumeric, "1e5"}, {701, "1.5"}} {
		_, err := Decode(bad.oid, []byte(bad.raw))
		require.Error(t, err, "%d %q", bad.oid, bad.raw)
	}
}

// FuzzDecode: a value Decode accepts prints back as the text it came from (Postgres's own
// output is canonical), except that a numeric's optional "+" sign and leading zeros are not
// Postgres output and may be normalised.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"t", "f", "0", "-1", "1.50", "00.10", "+3", "x", ""} {
		for _, oid := range []uint32{oidBool, oidInt8, oidNumeric, oidText} {
			f.Add(oid, s)
		}
	}
	f.Fuzz(func(t *testing.T, oid uint32, s string) {
		v, err := Decode(oid, []byte(s))
		if err != nil {
			return
		}
		again, err := Decode(oid, []byte(plain(v)))
		require.NoError(t, err, "%v", v)
		require.Equal(t, v, again)
	})
}

// plain is v as Postgres prints it in text format.
func plain(v merge.Value) string {
	if b, ok := v.AsBool(); ok {
		return map[bool]string{true: "t", false: "f"}[b]
	}
	if s, ok := v.AsText(); ok {
		return s
	}
	return v.String()
}

func TestGenerateCoversTheStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]int{}
	for range 2000 {
		q := Generate(rng)
		_, err := q.ShardSQL()
		require.NoError(t, err, "%s", q)
		switch {
		case q.Agg != nil && len(q.Agg.GroupBy) > 0:
			seen["grouped"]++
		case q.Agg != nil:
			seen["ungrouped"]++
		case q.Total():
			seen["total order"]++
		default:
			seen["partial order"]++
		}
		if q.Agg == nil && q.Limit.Offset > 0 {
			seen["offset"]++
		}
		if q.Agg == nil && q.Limit.Count == 0 {
			seen["limit 0"]++
		}
		for _, k := range q.Order {
			if k.Nulls != merge.NullsDefault {
				seen["explicit nulls"]++
			}
		}
		if q.Agg != nil {
			for _, a := range q.Agg.Aggs {
				seen[a.Func.String()]++
			}
		}
	}
	for _, k := range []string{"grouped", "ungrouped", "total order", "partial order", "offset", "limit 0", "explicit nulls", "count", "sum", "min", "max", "avg"} {
		require.Greater(t, seen[k], 20, "the stream rarely has %s: %v", k, seen)
	}
}

// A query of the stream as the unsharded server, and each shard, runs it.
func ExampleQuery() {
	q := Query{
		Where: "d",
		Order: merge.OrderBy{{Col: ColB, Desc: true, Nulls: merge.NullsLast}, {Col: ColID}},
		Limit: merge.Limit{Count: 10, Offset: 5},
	}
	shard, _ := q.ShardSQL()
	fmt.Println(q.SQL())
	fmt.Println(shard)
	agg := Query{Agg: &merge.Aggregation{GroupBy: []int{ColG}, Aggs: []merge.Agg{{Func: merge.CountStar}, {Func: merge.Avg, Col: ColC}}}}
	shard, _ = agg.ShardSQL()
	fmt.Println(agg.SQL())
	fmt.Println(shard)
	// Output:
	// SELECT id, a, b, c, d, g, i FROM t WHERE d ORDER BY b DESC NULLS LAST, id LIMIT 10 OFFSET 5
	// SELECT id, a, b, c, d, g, i FROM t WHERE d ORDER BY b DESC NULLS LAST, id LIMIT 15
	// SELECT g, count(*), avg(c) FROM t GROUP BY g ORDER BY g
	// SELECT g, count(*), sum(c), count(c) FROM t GROUP BY g
}
