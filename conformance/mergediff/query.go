package mergediff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/merge"
)

// Query is one query of the stream: an ordered scan (Order, Limit) or, when Agg is set, an
// aggregation; both filtered by Where.
type Query struct {
	Where string // an SQL predicate over the table, or ""
	Order merge.OrderBy
	Limit merge.Limit
	Agg   *merge.Aggregation
}

var predicates = []string{
	"a > 2", "a IS NULL", "b < 'b'", "b IS NOT NULL", "c >= 1.5", "d", "NOT d", "g = 'x'",
	"g IS NULL", "i < 0", "id % 3 = 0", "a > 100", "a BETWEEN -3 AND 3 AND d", "c IS NULL OR a = 0",
}

// Generate draws one query: half ordered scans, half aggregations; a third unfiltered.
func Generate(rng *rand.Rand) Query {
	var q Query
	if rng.IntN(3) > 0 {
		q.Where = predicates[rng.IntN(len(predicates))]
	}
	if rng.IntN(2) == 0 {
		q.Order, q.Limit = genOrder(rng), genLimit(rng)
		return q
	}
	q.Agg = genAgg(rng)
	return q
}

func genOrder(rng *rand.Rand) merge.OrderBy {
	cols := []int{ColA, ColB, ColC, ColD, ColG, ColI}
	rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
	var o merge.OrderBy
	for _, c := range cols[:rng.IntN(3)+1] {
		o = append(o, merge.Key{Col: c, Desc: rng.IntN(2) == 0, Nulls: merge.Nulls(rng.IntN(3))})
	}
	if rng.IntN(2) == 0 {
		o = append(o, merge.Key{Col: ColID, Desc: rng.IntN(2) == 0})
	}
	return o
}

func genLimit(rng *rand.Rand) merge.Limit {
	l := merge.Limit{Count: merge.All}
	switch rng.IntN(10) {
	case 0, 1, 2, 3:
	case 4:
		l.Count = 0
	case 5:
		l.Offset = rng.Int64N(60)
	default:
		l.Count = rng.Int64N(30) + 1
		if rng.IntN(3) > 0 {
			l.Offset = rng.Int64N(60)
		}
	}
	return l
}

func genAgg(rng *rand.Rand) *merge.Aggregation {
	groupable := []int{ColG, ColD, ColA, ColB}
	rng.Shuffle(len(groupable), func(i, j int) { groupable[i], groupable[j] = groupable[j], groupable[i] })
	a := &merge.Aggregation{GroupBy: slices.Clone(groupable[:rng.IntN(3)])}
	for range rng.IntN(4) + 1 {
		var ag merge.Agg
		switch rng.IntN(6) {
		case 0:
			ag = merge.Agg{Func: merge.CountStar}
		case 1:
			ag = merge.Agg{Func: merge.Count, Col: rng.IntN(len(Columns))}
		case 2:
			ag = merge.Agg{Func: merge.Sum, Col: []int{ColA, ColC, ColI}[rng.IntN(3)]}
		case 3:
			ag = merge.Agg{Func: merge.Avg, Col: []int{ColA, ColC, ColI}[rng.IntN(3)]}
		default:
			ag = merge.Agg{Func: []merge.Func{merge.Min, merge.Max}[rng.IntN(2)], Col: []int{ColA, ColB, ColC, ColG, ColI}[rng.IntN(5)], Distinct: rng.IntN(4) == 0}
		}
		a.Aggs = append(a.Aggs, ag)
	}
	return a
}

func keySQL(k merge.Key) string {
	s := Columns[k.Col]
	if k.Desc {
		s += " DESC"
	}
	switch k.Nulls {
	case merge.NullsFirst:
		s += " NULLS FIRST"
	case merge.NullsLast:
		s += " NULLS LAST"
	}
	return s
}

func aggSQL(a merge.Agg) string {
	if a.Func == merge.CountStar {
		return "count(*)"
	}
	d := ""
	if a.Distinct {
		d = "DISTINCT "
	}
	return a.Func.String() + "(" + d + Columns[a.Col] + ")"
}

func limitSQL(l merge.Limit) string {
	s := ""
	if l.Count >= 0 {
		s += " LIMIT " + strconv.FormatInt(l.Count, 10)
	}
	if l.Offset > 0 {
		s += " OFFSET " + strconv.FormatInt(l.Offset, 10)
	}
	return s
}

func (q Query) where() string {
	if q.Where == "" {
		return ""
	}
	return " WHERE " + q.Where
}

func (q Query) orderSQL() string {
	keys := make([]string, len(q.Order))
	for i, k := range q.Order {
		keys[i] = keySQL(k)
	}
	return " ORDER BY " + strings.Join(keys, ", ")
}

// SQL is the query as the unsharded server runs it.
func (q Query) SQL() string {
	if q.Agg == nil {
		return "SELECT " + strings.Join(Columns, ", ") + " FROM t" + q.where() + q.orderSQL() + limitSQL(q.Limit)
	}
	var sel, group []string
	for _, c := range q.Agg.GroupBy {
		sel = append(sel, Columns[c])
		group = append(group, Columns[c])
	}
	for _, a := range q.Agg.Aggs {
		sel = append(sel, aggSQL(a))
	}
	s := "SELECT " + strings.Join(sel, ", ") + " FROM t" + q.where()
	if len(group) > 0 {
		// The merge reference orders groups by their columns ascending, NULLs last: so does
		// this, for an exact comparison.
		s += " GROUP BY " + strings.Join(group, ", ") + " ORDER BY " + strings.Join(group, ", ")
	}
	return s
}

// FullSQL is the unsharded query without LIMIT and OFFSET: Check needs its answer when the
// ORDER BY is not total and the window may cut a run of tied rows.
func (q Query) FullSQL() string {
	return "SELECT " + strings.Join(Columns, ", ") + " FROM t" + q.where() + q.orderSQL()
}

// NeedsFull reports whether Check needs FullSQL's answer.
func (q Query) NeedsFull() bool {
	return q.Agg == nil && !q.Total() && (q.Limit.Count >= 0 || q.Limit.Offset > 0)
}

// Total reports whether the ORDER BY orders every row (it has the unique id as a key).
func (q Query) Total() bool {
	return slices.ContainsFunc(q.Order, func(k merge.Key) bool { return k.Col == ColID })
}

// Plan is the aggregation's plan; nil for an ordered scan.
func (q Query) Plan() (*merge.Plan, error) {
	if q.Agg == nil {
		return nil, nil
	}
	return merge.Decompose(*q.Agg)
}

// ShardSQL is what every shard runs: the same ORDER BY with the LIMIT the merge needs and no
// OFFSET, or the partial aggregates grouped by the group columns.
func (q Query) ShardSQL() (string, error) {
	if q.Agg == nil {
		return "SELECT " + strings.Join(Columns, ", ") + " FROM t" + q.where() + q.orderSQL() + limitSQL(q.Limit.PerShard()), nil
	}
	p, err := q.Plan()
	if err != nil {
		return "", err
	}
	sel, group := p.ShardSelect(func(i int) string { return Columns[i] })
	s := "SELECT " + strings.Join(sel, ", ") + " FROM t" + q.where()
	if len(group) > 0 {
		s += " GROUP BY " + strings.Join(group, ", ")
	}
	return s, nil
}

// Combine merges the shards' answers to ShardSQL into the answer to SQL.
func (q Query) Combine(shards [][]merge.Row) ([]merge.Row, error) {
	if q.Agg == nil {
		res, err := merge.Merge(shards, q.Order, q.Limit)
		return res.Rows, err
	}
	p, err := q.Plan()
	if err != nil {
		return nil, err
	}
	return p.Combine(shards)
}

// Request is the protocol request (kernel/merge's JSON lines) that combines the shards'
// answers to ShardSQL as Combine does, for another implementation of the protocol (the proved
// oracle) to answer too.
func (q Query) Request(shards [][]merge.Row) merge.Request {
	if q.Agg == nil {
		return &merge.MergeRequest{Order: q.Order, Limit: q.Limit, Shards: shards}
	}
	return &merge.AggregateRequest{Aggregation: *q.Agg, Input: merge.InputPartials, Shards: shards}
}

// String is the query for people: the unsharded SQL.
func (q Query) String() string { return q.SQL() }

// valueOnly lists the answer columns compared by value and not by display: MIN and MAX, whose
// display among numerically equal numbers (1.0 vs 1.00) depends on scan order in Postgres.
func (q Query) valueOnly() map[int]bool {
	out := map[int]bool{}
	if q.Agg != nil {
		for i, a := range q.Agg.Aggs {
			if a.Func == merge.Min || a.Func == merge.Max {
				out[len(q.Agg.GroupBy)+i] = true
			}
		}
	}
	return out
}

// same reports whether two values are the same answer: both NULL, or equal under SQL and
// (unless byValue) shown the same.
func same(a, b merge.Value, byValue bool) bool {
	if a.IsNull() || b.IsNull() {
		return a.IsNull() && b.IsNull()
	}
	if merge.Compare(a, b) != 0 || a.IsNumber() != b.IsNumber() {
		return false
	}
	return byValue || a.String() == b.String()
}

func sameRow(a, b merge.Row, valueOnly map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i], valueOnly[i]) {
			return false
		}
	}
	return true
}

func rowKey(r merge.Row) string {
	parts := make([]string, len(r))
	for i, v := range r {
		parts[i] = v.Kind().String() + ":" + v.String()
	}
	return strings.Join(parts, "|")
}

// Check compares the merged answer got with the unsharded answer want (full is the unsharded
// answer without LIMIT/OFFSET when NeedsFull, else ignored) and says what differs.
func (q Query) Check(want, got, full []merge.Row) error {
	vo := q.valueOnly()
	if q.Agg != nil || q.Total() {
		if len(want) != len(got) {
			return fmt.Errorf("%d rows, want %d", len(got), len(want))
		}
		for i := range want {
			if !sameRow(want[i], got[i], vo) {
				return fmt.Errorf("row %d is %v, want %v", i, got[i], want[i])
			}
		}
		return nil
	}
	if len(want) != len(got) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if q.Order.Compare(want[i], got[i]) != 0 {
			return fmt.Errorf("row %d sorts as %v, want a row sorting as %v", i, got[i], want[i])
		}
	}
	if !q.NeedsFull() {
		full = want
	}
	// Each run of rows tying on every key must hold rows of the unsharded answer's run with
	// that key, each at most as often as there. The key sequences match, so a run the window
	// holds whole has as many rows as the unsharded run: it is then exactly that run.
	for start := 0; start < len(got); {
		end := start + 1
		for end < len(got) && q.Order.Compare(got[start], got[end]) == 0 {
			end++
		}
		pool := map[string]int{}
		for _, r := range full {
			if q.Order.Compare(r, got[start]) == 0 {
				pool[rowKey(r)]++
			}
		}
		for _, r := range got[start:end] {
			k := rowKey(r)
			if pool[k] == 0 {
				return fmt.Errorf("row %v (at %d) is not among the unsharded answer's rows that tie with it", r, start)
			}
			pool[k]--
		}
		start = end
	}
	return nil
}
