package merge

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Generators and deliberately naive references shared by the property tests. The references
// share no code with the package beyond the Value constructors and String: numbers compare as
// big.Rat parsed from their printed form, and sorting is sort.SliceStable.

// colType is what a generated column holds.
type colType uint8

const (
	colInt colType = iota
	colDec
	colNum // ints and decimals mixed, as SUM and AVG results mix them
	colText
	colBool
)

var texts = []string{"", "a", "A", "b", "B", "ab", "a b", "Z", "é", "É", "日本", "\x7f", "a\u00e9", "10", "9", "~"}

func genValue(t *rapid.T, ct colType, label string) Value {
	if rapid.IntRange(0, 4).Draw(t, label+"/null") == 0 {
		return Null()
	}
	switch ct {
	case colInt:
		return genInt(t, label)
	case colDec:
		return genDec(t, label)
	case colNum:
		if rapid.Bool().Draw(t, label+"/int") {
			return genInt(t, label)
		}
		return genDec(t, label)
	case colText:
		return Text(rapid.SampledFrom(texts).Draw(t, label))
	}
	return Bool(rapid.Bool().Draw(t, label))
}

func genInt(t *rapid.T, label string) Value {
	if rapid.IntRange(0, 9).Draw(t, label+"/extreme") == 0 {
		return Int(rapid.SampledFrom([]int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}).Draw(t, label))
	}
	return Int(rapid.Int64Range(-3, 3).Draw(t, label))
}

func genDec(t *rapid.T, label string) Value {
	coef := big.NewInt(rapid.Int64Range(-300, 300).Draw(t, label+"/coef"))
	if rapid.IntRange(0, 9).Draw(t, label+"/huge") == 0 {
		coef.Add(coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(25), nil))
	}
	v, err := Decimal(coef, int32(rapid.IntRange(0, 3).Draw(t, label+"/scale")))
	if err != nil {
		panic(err)
	}
	return v
}

func genColTypes(t *rapid.T, minCols, maxCols int) []colType {
	n := rapid.IntRange(minCols, maxCols).Draw(t, "ncols")
	types := make([]colType, n)
	for i := range types {
		types[i] = colType(rapid.IntRange(0, int(colBool)).Draw(t, fmt.Sprintf("type%d", i)))
	}
	return types
}

func genRow(t *rapid.T, types []colType, label string) Row {
	row := make(Row, len(types))
	for c, ct := range types {
		row[c] = genValue(t, ct, fmt.Sprintf("%s[%d]", label, c))
	}
	return row
}

// genShards draws up to maxShards shards of up to maxRows rows.
func genShards(t *rapid.T, types []colType, maxShards, maxRows int) [][]Row {
	k := rapid.IntRange(0, maxShards).Draw(t, "shards")
	shards := make([][]Row, k)
	for s := range shards {
		n := rapid.IntRange(0, maxRows).Draw(t, fmt.Sprintf("rows%d", s))
		shards[s] = make([]Row, n)
		for r := range shards[s] {
			shards[s][r] = genRow(t, types, fmt.Sprintf("s%dr%d", s, r))
		}
	}
	return shards
}

// naiveRat is a number's exact value, from its printed form.
func naiveRat(v Value) *big.Rat {
	r, ok := new(big.Rat).SetString(v.String())
	if !ok {
		panic("not a number: " + v.String())
	}
	return r
}

// naiveCompare orders non-NULL values: bool < number < text; false < true; numbers by value;
// text by bytes.
func naiveCompare(a, b Value) int {
	rank := func(v Value) int {
		switch {
		case v.Kind() == KindBool:
			return 0
		case v.IsNumber():
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	switch rank(a) {
	case 0:
		x, _ := a.AsBool()
		y, _ := b.AsBool()
		switch {
		case x == y:
			return 0
		case y:
			return -1
		}
		return 1
	case 1:
		return naiveRat(a).Cmp(naiveRat(b))
	}
	x, _ := a.AsText()
	y, _ := b.AsText()
	return strings.Compare(x, y)
}

// naiveLess is ORDER BY as the SQL standard words it, key by key.
func naiveLess(by OrderBy, a, b Row) bool {
	for _, k := range by {
		x, y := a[k.Col], b[k.Col]
		nullsFirst := k.Nulls == NullsFirst || k.Nulls == NullsDefault && k.Desc
		switch {
		case x.IsNull() && y.IsNull():
			continue
		case x.IsNull():
			return nullsFirst
		case y.IsNull():
			return !nullsFirst
		}
		c := naiveCompare(x, y)
		if c == 0 {
			continue
		}
		return (c < 0) != k.Desc
	}
	return false
}

func sortNaive(by OrderBy, rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool { return naiveLess(by, rows[i], rows[j]) })
}

// naiveMerge is the definition: concatenate, sort stably, skip Offset, keep Count.
func naiveMerge(shards [][]Row, by OrderBy, l Limit) ([]Row, []int) {
	type tagged struct {
		row   Row
		shard int
	}
	var all []tagged
	for s, rows := range shards {
		for _, r := range rows {
			all = append(all, tagged{r, s})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return naiveLess(by, all[i].row, all[j].row) })
	if l.Offset >= int64(len(all)) {
		all = nil
	} else {
		all = all[l.Offset:]
	}
	if l.Count >= 0 && l.Count < int64(len(all)) {
		all = all[:l.Count]
	}
	rows, from := make([]Row, len(all)), make([]int, len(all))
	for i, x := range all {
		rows[i], from[i] = x.row, x.shard
	}
	return rows, from
}

type mergeCase struct {
	Shards [][]Row
	By     OrderBy
	Limit  Limit
}

func (c mergeCase) String() string {
	return fmt.Sprintf("%s %s shards=%v", c.By, c.Limit, c.Shards)
}

// genMergeCase draws sorted shards, an ORDER BY over their columns (keys may repeat a column
// or be empty) and a LIMIT/OFFSET. Values come from small domains so ties and NULLs are common.
func genMergeCase() *rapid.Generator[mergeCase] {
	return rapid.Custom(func(t *rapid.T) mergeCase {
		types := genColTypes(t, 1, 4)
		nk := rapid.IntRange(0, len(types)+1).Draw(t, "keys")
		by := make(OrderBy, nk)
		for i := range by {
			by[i] = Key{
				Col:   rapid.IntRange(0, len(types)-1).Draw(t, fmt.Sprintf("key%d.col", i)),
				Desc:  rapid.Bool().Draw(t, fmt.Sprintf("key%d.desc", i)),
				Nulls: Nulls(rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("key%d.nulls", i))),
			}
		}
		shards := genShards(t, types, 6, 10)
		for _, rows := range shards {
			sortNaive(by, rows)
		}
		l := Limit{Count: All}
		if rapid.IntRange(0, 3).Draw(t, "limited") > 0 {
			l.Count = rapid.Int64Range(0, 25).Draw(t, "limit")
		}
		switch rapid.IntRange(0, 5).Draw(t, "offsetKind") {
		case 0:
			l.Offset = math.MaxInt64
		case 1, 2:
		default:
			l.Offset = rapid.Int64Range(0, 25).Draw(t, "offset")
		}
		return mergeCase{Shards: shards, By: by, Limit: l}
	})
}

// identicalRows compares rows value by value with ==, which is identity (kind, value and
// display scale).
func identicalRows(a, b []Row) bool {
	return slices.EqualFunc(a, b, func(x, y Row) bool { return slices.Equal(x, y) })
}

// checkProperty fails the test with rapid's shrunk counterexample when diff reports a
// difference on a generated case.
func checkProperty[C any](t *testing.T, gen *rapid.Generator[C], diff func(C) string) {
	t.Helper()
	rapid.Check(t, func(rt *rapid.T) {
		if d := diff(gen.Draw(rt, "case")); d != "" {
			rt.Fatal(d)
		}
	})
}

// requireCaught shows a property is not vacuous: with the named mutant on, diff must report a
// difference on one of the first n generated cases.
func requireCaught[C any](t *testing.T, mutant string, gen *rapid.Generator[C], n int, diff func(C) string) {
	t.Helper()
	i, d := caughtWithin(gen, n, diff)
	require.GreaterOrEqual(t, i, 0, "%s survived %d cases", mutant, n)
	t.Logf("%s caught at example %d:\n%s", mutant, i, d)
}

// caughtWithin reports the first of n generated examples on which diff (with the mutant on)
// reports a difference, or -1.
func caughtWithin[C any](gen *rapid.Generator[C], n int, diff func(C) string) (int, string) {
	for i := range n {
		if d := diff(gen.Example(i)); d != "" {
			return i, d
		}
	}
	return -1, ""
}
