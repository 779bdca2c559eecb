package merge

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

type aggCase struct {
	A      Aggregation
	Shards [][]Row
}

func (c aggCase) String() string {
	return fmt.Sprintf("group by %v aggs %v shards=%v", c.A.GroupBy, c.A.Aggs, c.Shards)
}

// genAggCase draws rows over a few typed columns, a GROUP BY of up to two of them and up to six
// aggregates; SUM and AVG only get numeric columns (Postgres refuses the rest at plan time).
func genAggCase() *rapid.Generator[aggCase] {
	return rapid.Custom(func(t *rapid.T) aggCase {
		types := genColTypes(t, 1, 4)
		var numeric []int
		for c, ct := range types {
			if ct == colInt || ct == colDec || ct == colNum {
				numeric = append(numeric, c)
			}
		}
		var a Aggregation
		for i := range rapid.IntRange(0, 2).Draw(t, "groups") {
			a.GroupBy = append(a.GroupBy, rapid.IntRange(0, len(types)-1).Draw(t, fmt.Sprintf("group%d", i)))
		}
		for i := range rapid.IntRange(0, 6).Draw(t, "aggs") {
			f := Func(rapid.IntRange(int(CountStar), int(Avg)).Draw(t, fmt.Sprintf("agg%d.fn", i)))
			col := rapid.IntRange(0, len(types)-1).Draw(t, fmt.Sprintf("agg%d.col", i))
			if f == Sum || f == Avg {
				if len(numeric) == 0 {
					f = Count
				} else {
					col = rapid.SampledFrom(numeric).Draw(t, fmt.Sprintf("agg%d.numcol", i))
				}
			}
			distinct := (f == Min || f == Max) && rapid.Bool().Draw(t, fmt.Sprintf("agg%d.distinct", i))
			a.Aggs = append(a.Aggs, Agg{Func: f, Col: col, Distinct: distinct})
		}
		return aggCase{A: a, Shards: genShards(t, types, 5, 8)}
	})
}

// naiveAggregate computes the aggregation over the union of the shards directly, with big.Rat
// arithmetic and linear searches: no partials, no shared code with Plan.
func naiveAggregate(a Aggregation, shards [][]Row) []Row {
	type grp struct {
		key  Row
		rows []Row
	}
	var groups []*grp
	sameKey := func(x, y Row) bool {
		for i := range x {
			if x[i].IsNull() != y[i].IsNull() || !x[i].IsNull() && naiveCompare(x[i], y[i]) != 0 {
				return false
			}
		}
		return true
	}
	for _, rows := range shards {
		for _, row := range rows {
			key := make(Row, len(a.GroupBy))
			for i, c := range a.GroupBy {
				key[i] = row[c]
			}
			i := slices.IndexFunc(groups, func(g *grp) bool { return sameKey(g.key, key) })
			if i < 0 {
				groups = append(groups, &grp{key: key})
				i = len(groups) - 1
			}
			groups[i].rows = append(groups[i].rows, row)
		}
	}
	if len(a.GroupBy) == 0 && len(groups) == 0 {
		groups = append(groups, &grp{})
	}
	by := make(OrderBy, len(a.GroupBy))
	for i := range by {
		by[i] = Key{Col: i}
	}
	slices.SortStableFunc(groups, func(x, y *grp) int {
		switch {
		case naiveLess(by, x.key, y.key):
			return -1
		case naiveLess(by, y.key, x.key):
			return 1
		}
		return 0
	})
	var out []Row
	for _, g := range groups {
		row := slices.Clone(g.key)
		for _, ag := range a.Aggs {
			var vals []Value
			for _, r := range g.rows {
				switch {
				case ag.Func == CountStar:
					vals = append(vals, Null()) // counted, never read
				case !r[ag.Col].IsNull():
					vals = append(vals, r[ag.Col])
				}
			}
			switch ag.Func {
			case CountStar, Count:
				row = append(row, Int(int64(len(vals))))
			case Sum:
				row = append(row, naiveSum(vals))
			case Avg:
				if len(vals) == 0 {
					row = append(row, Null())
				} else {
					row = append(row, naiveAvg(vals))
				}
			case Min, Max:
				best := Null()
				for _, v := range vals {
					c := naiveCompare(v, best)
					if best.IsNull() || ag.Func == Min && c <= 0 || ag.Func == Max && c >= 0 {
						best = v
					}
				}
				row = append(row, best)
			}
		}
		out = append(out, row)
	}
	return out
}

func ratSum(vals []Value) (*big.Rat, int32) {
	sum, scale := new(big.Rat), int32(0)
	for _, v := range vals {
		sum.Add(sum, naiveRat(v))
		scale = max(scale, v.Scale())
	}
	return sum, scale
}

// ratToValue writes an exact rational that has at most scale decimals as a Value of that scale.
func ratToValue(r *big.Rat, scale int32) Value {
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !x.IsInt() {
		panic(fmt.Sprintf("%v does not fit scale %d", r, scale))
	}
	v, err := Decimal(x.Num(), scale)
	if err != nil {
		panic(err)
	}
	return v
}

func naiveSum(vals []Value) Value {
	if len(vals) == 0 {
		return Null()
	}
	sum, scale := ratSum(vals)
	return ratToValue(sum, scale)
}

// naiveBase10000 returns the weight w with 10000^w ≤ |x| < 10000^(w+1) and floor(|x|/10000^w),
// found by stepping powers of 10000; (0, 0) for zero.
func naiveBase10000(x *big.Rat) (int64, int64) {
	ax := new(big.Rat).Abs(x)
	if ax.Sign() == 0 {
		return 0, 0
	}
	base := big.NewRat(10000, 1)
	pow := func(w int64) *big.Rat {
		p := big.NewRat(1, 1)
		for range max(w, -w) {
			if w > 0 {
				p.Mul(p, base)
			} else {
				p.Quo(p, base)
			}
		}
		return p
	}
	w := int64(0)
	for ax.Cmp(pow(w+1)) >= 0 {
		w++
	}
	for ax.Cmp(pow(w)) < 0 {
		w--
	}
	q := new(big.Rat).Quo(ax, pow(w))
	return w, new(big.Int).Quo(q.Num(), q.Denom()).Int64()
}

// naiveAvg restates Postgres's rule: result scale 16 - 4·qweight, at least the sum's scale, at
// most 1000, where qweight is the difference of base-10000 weights, one less when the
// dividend's leading base-10000 digit is not above the divisor's; rounded half away from zero.
func naiveAvg(vals []Value) Value {
	sum, scale := ratSum(vals)
	n := big.NewRat(int64(len(vals)), 1)
	w1, f1 := naiveBase10000(sum)
	w2, f2 := naiveBase10000(n)
	q := w1 - w2
	if f1 <= f2 {
		q--
	}
	rscale := min(max(16-4*q, int64(scale), 0), 1000)
	x := new(big.Rat).Quo(sum, n)
	x.Mul(x, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(rscale), nil)))
	neg := x.Sign() < 0
	x.Abs(x).Add(x, big.NewRat(1, 2))
	coef := new(big.Int).Quo(x.Num(), x.Denom())
	if neg {
		coef.Neg(coef)
	}
	v, err := Decimal(coef, int32(rscale))
	if err != nil {
		panic(err)
	}
	return v
}

func aggDiff(c aggCase, mut mutation) string {
	got, _, err := aggregateWith(c.A, c.Shards, mut)
	if err != nil {
		return "error: " + err.Error()
	}
	if want := naiveAggregate(c.A, c.Shards); !identicalRows(got, want) {
		return fmt.Sprintf("decomposed: %v\nover the union: %v", got, want)
	}
	return ""
}

// TestDecomposedAggregatesEqualUnion: per-shard partials combined equal the aggregation computed
// directly over the union of the shards, value for value and display scale for display scale.
func TestDecomposedAggregatesEqualUnion(t *testing.T) {
	checkProperty(t, genAggCase(), func(c aggCase) string { return aggDiff(c, 0) })
}

func TestAggregateMutantAvgOfAveragesIsCaught(t *testing.T) {
	requireCaught(t, "mutAvgOfAverages", genAggCase(), 1000, func(c aggCase) string { return aggDiff(c, mutAvgOfAverages) })
}

// TestCombineOfShardRowsEqualsAggregate: feeding Plan.ShardRows's output to Combine, as a
// router feeds real shard answers, is what Aggregate does.
func TestCombineOfShardRowsEqualsAggregate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genAggCase().Draw(t, "case")
		plan, err := Decompose(c.A)
		require.NoError(t, err)
		partials := make([][]Row, len(c.Shards))
		for s, rows := range c.Shards {
			partials[s], err = plan.ShardRows(rows)
			require.NoError(t, err)
			for _, row := range partials[s] {
				require.Len(t, row, len(c.A.GroupBy)+len(plan.Partials), "a partial row is the group columns and the partials")
			}
		}
		got, err := plan.Combine(partials)
		require.NoError(t, err)
		want, _, err := Aggregate(c.A, c.Shards)
		require.NoError(t, err)
		require.True(t, identicalRows(got, want), "%v\n%v", got, want)
	})
}

func TestDecomposePartials(t *testing.T) {
	plan, err := Decompose(Aggregation{GroupBy: []int{3}, Aggs: []Agg{
		{Func: Avg, Col: 1}, {Func: CountStar}, {Func: Sum, Col: 1}, {Func: Count, Col: 1}, {Func: Max, Col: 2, Distinct: true}, {Func: CountStar},
	}})
	require.NoError(t, err)
	require.Equal(t, []Agg{{Func: Sum, Col: 1}, {Func: Count, Col: 1}, {Func: CountStar}, {Func: Max, Col: 2}}, plan.Partials,
		"AVG becomes SUM then COUNT; a partial needed twice is listed once; MAX(DISTINCT) is MAX")
	sel, group := plan.ShardSelect(func(i int) string { return fmt.Sprintf("c%d", i) })
	require.Equal(t, []string{"c3", "sum(c1)", "count(c1)", "count(*)", "max(c2)"}, sel)
	require.Equal(t, []string{"c3"}, group)
	require.Equal(t, "count(distinct #4)", Agg{Func: Count, Col: 4, Distinct: true}.String())
}

func TestNotDecomposable(t *testing.T) {
	for _, f := range []Func{Count, Sum, Avg} {
		_, err := Decompose(Aggregation{Aggs: []Agg{{Func: Min, Col: 0}, {Func: f, Col: 1, Distinct: true}}})
		var nd *NotDecomposableError
		require.ErrorAs(t, err, &nd, "%v(distinct)", f)
		require.ErrorIs(t, err, ErrNotDecomposable)
		require.Equal(t, 1, nd.Index)
		require.Equal(t, f.String()+"(distinct)", nd.Agg)
		require.Contains(t, err.Error(), "aggs[1]: "+f.String()+"(distinct) is not decomposable")
	}
	for _, name := range []string{"string_agg", "array_agg", "percentile_cont", "mode", "stddev"} {
		_, err := ParseFunc(name)
		var nd *NotDecomposableError
		require.ErrorAs(t, err, &nd, name)
		require.Equal(t, name, nd.Agg)
	}
	_, err := ParseFunc("frobnicate")
	require.ErrorIs(t, err, ErrBadInput)
	require.False(t, errors.Is(err, ErrNotDecomposable))
	_, err = Decompose(Aggregation{Aggs: []Agg{{Func: CountStar, Distinct: true}}})
	require.ErrorContains(t, err, "aggs[0].distinct: count(distinct *) is not SQL")
	_, err = Decompose(Aggregation{Aggs: []Agg{{Func: 0}}})
	require.ErrorContains(t, err, "aggs[0].fn")
	_, err = Decompose(Aggregation{GroupBy: []int{-2}})
	require.ErrorContains(t, err, "group_by[0]: column -2 is negative")
}

// TestAggregateOfNothing pins SQL's answers over no rows: one row without GROUP BY (COUNT 0,
// the rest NULL), no rows with GROUP BY.
func TestAggregateOfNothing(t *testing.T) {
	a := Aggregation{Aggs: []Agg{{Func: CountStar}, {Func: Count, Col: 0}, {Func: Sum, Col: 0}, {Func: Min, Col: 0}, {Func: Max, Col: 0}, {Func: Avg, Col: 0}}}
	for _, shards := range [][][]Row{nil, {{}, {}}, {{{Null()}}, {{Null()}}}} {
		rows, _, err := Aggregate(a, shards)
		require.NoError(t, err)
		n := int64(0)
		for _, s := range shards {
			n += int64(len(s))
		}
		require.Equal(t, []Row{{Int(n), Int(0), Null(), Null(), Null(), Null()}}, rows, "shards %v", shards)
	}
	a.GroupBy = []int{0}
	rows, _, err := Aggregate(a, [][]Row{{}, {}})
	require.NoError(t, err)
	require.Empty(t, rows)
	rows, _, err = Aggregate(a, [][]Row{{{Null()}}, {{Null()}}})
	require.NoError(t, err)
	require.Equal(t, []Row{{Null(), Int(2), Int(0), Null(), Null(), Null(), Null()}}, rows, "NULLs are one group")
}

func TestGroupByMatchesNumbersByValue(t *testing.T) {
	one, _ := ParseDecimal("1.0")
	rows, _, err := Aggregate(Aggregation{GroupBy: []int{0}, Aggs: []Agg{{Func: CountStar}}},
		[][]Row{{{one}, {Int(2)}}, {{Int(1)}}})
	require.NoError(t, err)
	require.Equal(t, []Row{{one, Int(2)}, {Int(2), Int(1)}}, rows, "1.0 and 1 are one group, shown as first seen")
}

func TestAggregateRejectsBadData(t *testing.T) {
	a := Aggregation{Aggs: []Agg{{Func: Sum, Col: 1}}}
	_, _, err := Aggregate(a, [][]Row{{{Int(1), Int(2)}}, {{Int(1), Text("x")}}})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "shards[1][0][1]", fe.Field)
	require.Contains(t, err.Error(), `sum of "x", a text; sum and avg take numbers`)

	_, _, err = Aggregate(a, [][]Row{{{Int(1)}}})
	require.ErrorContains(t, err, "shards[0][0]: row has 1 columns but the aggregation reads column 1")

	plan, err := Decompose(Aggregation{GroupBy: []int{0}, Aggs: []Agg{{Func: Count, Col: 1}}})
	require.NoError(t, err)
	_, err = plan.Combine([][]Row{{{Text("a"), Int(-1)}}})
	require.ErrorContains(t, err, "shards[0][0][1]: a partial count must be a non-negative integer, not -1")
	_, err = plan.Combine([][]Row{{{Text("a"), Null()}}})
	require.ErrorContains(t, err, "a partial count must be a non-negative integer, not null")
	_, err = plan.Combine([][]Row{{}, {{Text("a")}}})
	require.ErrorContains(t, err, "shards[1][0]: a partial row has 1 columns; this plan's have 2")
	_, err = plan.Combine([][]Row{{{Text("a"), Int(math64)}, {Text("a"), Int(math64)}}})
	require.ErrorContains(t, err, "the counts overflow int64")
}

const math64 = 1<<63 - 1

func TestCombineRefusesDisagreeingAvgPartials(t *testing.T) {
	plan, err := Decompose(Aggregation{Aggs: []Agg{{Func: Avg, Col: 0}}})
	require.NoError(t, err)
	_, err = plan.Combine([][]Row{{{Int(5), Int(1)}}, {{Null(), Int(3)}}})
	require.ErrorContains(t, err, "shards[1][0]: sum(#0) is null but count(#0) is 3: the partials of avg(#0) disagree")
	_, err = plan.Combine([][]Row{{{Int(5), Int(0)}}})
	require.ErrorContains(t, err, "sum(#0) is 5 but count(#0) is 0")
}

type partialsCase struct {
	Plan   *Plan
	Shards [][]Row
}

// genFaultyPartials draws partial rows as a faulty shard might send them. Values mostly have
// the kind their partial returns (counts from 0 to 3, sums numbers or NULL), so that partials
// that disagree with each other, such as a NULL sum beside a positive count, are common.
func genFaultyPartials() *rapid.Generator[partialsCase] {
	return rapid.Custom(func(t *rapid.T) partialsCase {
		c := genAggCase().Draw(t, "case")
		plan, err := Decompose(c.A)
		if err != nil {
			panic(err)
		}
		ng, w := len(c.A.GroupBy), len(c.A.GroupBy)+len(plan.Partials)
		anyValue := func(label string) Value {
			return genValue(t, colType(rapid.IntRange(0, int(colBool)).Draw(t, label+"/type")), label)
		}
		shards := make([][]Row, rapid.IntRange(0, 3).Draw(t, "shards"))
		for s := range shards {
			for r := range rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("rows%d", s)) {
				width := w
				if rapid.IntRange(0, 9).Draw(t, "wrongWidth") == 0 {
					width = rapid.IntRange(0, w+1).Draw(t, "width")
				}
				row := make(Row, width)
				for j := range row {
					label := fmt.Sprintf("s%dr%dc%d", s, r, j)
					switch {
					case j < ng || j >= w || rapid.IntRange(0, 5).Draw(t, label+"/odd") == 0:
						row[j] = anyValue(label)
					case plan.Partials[j-ng].Func == CountStar || plan.Partials[j-ng].Func == Count:
						row[j] = Int(rapid.Int64Range(0, 3).Draw(t, label))
					case plan.Partials[j-ng].Func == Sum:
						row[j] = genValue(t, colNum, label)
					default:
						row[j] = anyValue(label)
					}
				}
				shards[s] = append(shards[s], row)
			}
		}
		return partialsCase{Plan: plan, Shards: shards}
	})
}

// TestCombineNeverPanics: faulty partial rows get an answer or an error, never a panic. The
// cases are drawn at full size (Example), not grown from small ones, so that 2,000 of them
// reach the disagreeing partials quickly.
func TestCombineNeverPanics(t *testing.T) {
	gen := genFaultyPartials()
	for i := range 2000 {
		c := gen.Example(i)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("Combine panicked on %v: %v", c.Shards, p)
				}
			}()
			if _, err := c.Plan.Combine(c.Shards); err != nil {
				require.ErrorIs(t, err, ErrBadInput)
			}
		}()
	}
}
