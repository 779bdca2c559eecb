package merge

import (
	"slices"
	"strconv"
)

// Func is an aggregate function this reference can decompose.
type Func uint8

const (
	CountStar Func = iota + 1 // COUNT(*): rows
	Count                     // COUNT(col): rows where col is not NULL
	Sum                       // SUM(col): exact; NULL when no non-NULL value
	Min                       // MIN(col): NULL when no non-NULL value
	Max                       // MAX(col): NULL when no non-NULL value
	Avg                       // AVG(col) = SUM/COUNT with Postgres's numeric division; NULL when COUNT is 0
)

// String returns the SQL name: "count", "sum", "min", "max" or "avg".
func (f Func) String() string {
	switch f {
	case CountStar, Count:
		return "count"
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	case Avg:
		return "avg"
	}
	return "Func(" + strconv.Itoa(int(f)) + ")"
}

// notDecomposable lists aggregates Postgres has that per-shard partials cannot produce here,
// so a request naming them is refused with a reason instead of being called unknown.
var notDecomposable = map[string]string{
	"array_agg":        "its result depends on the order rows arrive across shards",
	"string_agg":       "its result depends on the order rows arrive across shards",
	"json_agg":         "its result depends on the order rows arrive across shards",
	"jsonb_agg":        "its result depends on the order rows arrive across shards",
	"json_object_agg":  "its result depends on the order rows arrive across shards",
	"jsonb_object_agg": "its result depends on the order rows arrive across shards",
	"percentile_cont":  "a percentile needs every value of the group in one place",
	"percentile_disc":  "a percentile needs every value of the group in one place",
	"mode":             "the most frequent value needs every value of the group in one place",
	"stddev":           "it needs sums of squares as partials, which this reference does not compute",
	"stddev_pop":       "it needs sums of squares as partials, which this reference does not compute",
	"stddev_samp":      "it needs sums of squares as partials, which this reference does not compute",
	"variance":         "it needs sums of squares as partials, which this reference does not compute",
	"var_pop":          "it needs sums of squares as partials, which this reference does not compute",
	"var_samp":         "it needs sums of squares as partials, which this reference does not compute",
}

// ParseFunc maps an SQL aggregate name (lower case, as the protocol writes it) to a Func;
// "count" is Count, and COUNT(*) is Count with no column (the caller decides, see Agg). A name
// Postgres has but this reference cannot decompose returns a *NotDecomposableError; any other
// name a *FieldError.
func ParseFunc(name string) (Func, error) {
	switch name {
	case "count":
		return Count, nil
	case "sum":
		return Sum, nil
	case "min":
		return Min, nil
	case "max":
		return Max, nil
	case "avg":
		return Avg, nil
	}
	if reason, ok := notDecomposable[name]; ok {
		return 0, &NotDecomposableError{Index: -1, Agg: name, Reason: reason}
	}
	return 0, fieldErrorf("", "%q is not an aggregate this reference knows (count, sum, min, max, avg)", name)
}

// Agg is one aggregate of a query. Col is ignored for CountStar. Distinct is DISTINCT inside
// the call: MIN and MAX do not change under it, COUNT, SUM and AVG become non-decomposable.
type Agg struct {
	Func     Func
	Col      int
	Distinct bool
}

// String writes the aggregate as SQL over numbered columns: "count(*)", "sum(#2)",
// "count(distinct #1)".
func (a Agg) String() string {
	if a.Func == CountStar {
		return "count(*)"
	}
	d := ""
	if a.Distinct {
		d = "distinct "
	}
	return a.Func.String() + "(" + d + "#" + strconv.Itoa(a.Col) + ")"
}

// Aggregation is the aggregate part of a query: GROUP BY columns (possibly none) and the
// aggregates. Its result rows are the group columns followed by the aggregates.
type Aggregation struct {
	GroupBy []int
	Aggs    []Agg
}

// Plan is how an Aggregation runs across shards. Each shard runs
//
//	SELECT <group columns>, <Partials> FROM … GROUP BY <group columns>
//
// (see ShardSelect) and Combine folds the shards' rows into the answer.
type Plan struct {
	GroupBy  []int
	Partials []Agg // no Avg and no Distinct; shard rows hold the group columns, then these
	finals   []final
	mut      mutation
}

// final says how one requested aggregate is read off the combined partials.
type final struct {
	fn   Func
	p, q int // partial indexes; q is AVG's count
}

// Decompose plans an aggregation: COUNT(*), COUNT, SUM, MIN and MAX are their own partials
// (counts and sums add up, minima and maxima take the min and max), and AVG(x) becomes SUM(x) and
// COUNT(x), divided at the end as Postgres divides. A partial needed twice is computed once; the
// partials appear in the order the aggregates first need them. COUNT(DISTINCT), SUM(DISTINCT)
// and AVG(DISTINCT) return a *NotDecomposableError: a value present on two shards must count
// once, and per-shard results cannot tell.
func Decompose(a Aggregation) (*Plan, error) { return decompose(a, 0) }

func decompose(a Aggregation, mut mutation) (*Plan, error) {
	p := &Plan{GroupBy: slices.Clone(a.GroupBy), mut: mut}
	for i, c := range a.GroupBy {
		if c < 0 {
			return nil, fieldErrorf("group_by["+strconv.Itoa(i)+"]", "column %d is negative (columns are numbered from 0)", c)
		}
	}
	need := func(f Func, col int) int {
		if f == CountStar {
			col = 0
		}
		want := Agg{Func: f, Col: col}
		if j := slices.Index(p.Partials, want); j >= 0 {
			return j
		}
		p.Partials = append(p.Partials, want)
		return len(p.Partials) - 1
	}
	for i, ag := range a.Aggs {
		at := "aggs[" + strconv.Itoa(i) + "]"
		if ag.Func < CountStar || ag.Func > Avg {
			return nil, fieldErrorf(at+".fn", "%v is not CountStar, Count, Sum, Min, Max or Avg", ag.Func)
		}
		if ag.Func != CountStar && ag.Col < 0 {
			return nil, fieldErrorf(at+".col", "column %d is negative (columns are numbered from 0)", ag.Col)
		}
		if ag.Distinct {
			switch ag.Func {
			case CountStar:
				return nil, fieldErrorf(at+".distinct", "count(distinct *) is not SQL; give count a column")
			case Count, Sum, Avg:
				return nil, &NotDecomposableError{Index: i, Agg: ag.Func.String() + "(distinct)",
					Reason: "a value present on two shards must count once, and per-shard results cannot tell"}
			}
		}
		switch ag.Func {
		case Avg:
			p.finals = append(p.finals, final{fn: Avg, p: need(Sum, ag.Col), q: need(Count, ag.Col)})
		default:
			p.finals = append(p.finals, final{fn: ag.Func, p: need(ag.Func, ag.Col)})
		}
	}
	return p, nil
}

// ShardSelect renders the per-shard query's select list (group columns, then the partials)
// and GROUP BY list, with col(i) naming column i. For text columns col must add COLLATE "C"
// (or the table must use it): MIN and MAX here compare bytewise.
func (p *Plan) ShardSelect(col func(int) string) (selectList, groupBy []string) {
	for _, c := range p.GroupBy {
		selectList = append(selectList, col(c))
		groupBy = append(groupBy, col(c))
	}
	for _, pa := range p.Partials {
		if pa.Func == CountStar {
			selectList = append(selectList, "count(*)")
			continue
		}
		selectList = append(selectList, pa.Func.String()+"("+col(pa.Col)+")")
	}
	return selectList, groupBy
}

// partial accumulates one partial aggregate of one group.
type partial struct {
	count int64
	sum   numSum
	best  Value
	has   bool
}

// group is the state of one GROUP BY group.
type group struct {
	key      Row // the group's values as first seen
	partials []partial
	// Only under mutAvgOfAverages: per AVG, the sum and number of per-shard averages.
	avgs []numSum
	navg []int64
}

// grouper folds rows into groups.
type grouper struct {
	p      *Plan
	index  map[string]int
	groups []*group
	keybuf []byte
}

func newGrouper(p *Plan) *grouper { return &grouper{p: p, index: map[string]int{}} }

func (g *grouper) groupOf(key Row) *group {
	g.keybuf = g.keybuf[:0]
	for _, v := range key {
		g.keybuf = appendKey(g.keybuf, v)
	}
	if i, ok := g.index[string(g.keybuf)]; ok {
		return g.groups[i]
	}
	gr := &group{key: slices.Clone(key), partials: make([]partial, len(g.p.Partials))}
	if g.p.mut&mutAvgOfAverages != 0 {
		gr.avgs, gr.navg = make([]numSum, len(g.p.finals)), make([]int64, len(g.p.finals))
	}
	g.index[string(g.keybuf)] = len(g.groups)
	g.groups = append(g.groups, gr)
	return gr
}

// fold adds one value to a partial. From raw rows (raw) a COUNT counts the row; from partial
// rows it adds the shard's count. MIN and MAX keep the last of equal values, as Postgres's
// numeric_smaller and numeric_larger do (1.0 and 1.00 are equal but print differently).
func (pa *partial) fold(f Func, v Value, raw bool, field func() string) error {
	switch f {
	case CountStar, Count:
		if raw {
			if f == CountStar || v.kind != KindNull {
				pa.count++
			}
			return nil
		}
		n, ok := v.AsInt64()
		if !ok || n < 0 {
			return fieldErrorf(field(), "a partial count must be a non-negative integer, not %v", v)
		}
		if pa.count+n < pa.count {
			return fieldErrorf(field(), "the counts overflow int64")
		}
		pa.count += n
	case Sum:
		if v.kind == KindNull {
			return nil
		}
		if !v.IsNumber() {
			return fieldErrorf(field(), "sum of %v, a %v; sum and avg take numbers", v, v.kind)
		}
		pa.sum.add(v)
	case Min, Max:
		if v.kind == KindNull {
			return nil
		}
		c := Compare(v, pa.best)
		if !pa.has || f == Min && c <= 0 || f == Max && c >= 0 {
			pa.best, pa.has = v, true
		}
	}
	return nil
}

func (pa *partial) value(f Func) Value {
	switch f {
	case CountStar, Count:
		return Int(pa.count)
	case Sum:
		return pa.sum.value()
	}
	if !pa.has {
		return Value{}
	}
	return pa.best
}

// ShardRows computes what one shard's query returns for its raw rows: one row per group (the
// group columns, then the partials), ordered by the group columns ascending. Without GROUP BY
// it is exactly one row, even for no rows (COUNT 0, the rest NULL), as in SQL. It is the
// reference for the shard side; a real shard's rows go to Combine directly.
func (p *Plan) ShardRows(rows []Row) ([]Row, error) {
	g := newGrouper(p)
	if err := g.addRaw(rows, "rows"); err != nil {
		return nil, err
	}
	return g.rows(false), nil
}

func (g *grouper) width() int {
	w := 0
	for _, c := range g.p.GroupBy {
		w = max(w, c+1)
	}
	for _, pa := range g.p.Partials {
		if pa.Func != CountStar {
			w = max(w, pa.Col+1)
		}
	}
	return w
}

func (g *grouper) addRaw(rows []Row, path string) error {
	w := g.width()
	key := make(Row, len(g.p.GroupBy))
	for r, row := range rows {
		at := path + "[" + strconv.Itoa(r) + "]"
		if len(row) < w {
			return fieldErrorf(at, "row has %d columns but the aggregation reads column %d", len(row), w-1)
		}
		for i, c := range g.p.GroupBy {
			key[i] = row[c]
		}
		gr := g.groupOf(key)
		for j, pa := range g.p.Partials {
			var v Value
			if pa.Func != CountStar {
				v = row[pa.Col]
			}
			if err := gr.partials[j].fold(pa.Func, v, true, func() string { return at + "[" + strconv.Itoa(pa.Col) + "]" }); err != nil {
				return err
			}
		}
	}
	return nil
}

// Combine folds the shards' partial rows (each the group columns followed by the Partials, as
// ShardSelect's query returns them) into the answer: one row per group with the group columns
// and then the requested aggregates, ordered by the group columns ascending (NULLs last). NULLs
// form one group and groups match by value (1.0 and 1 are one group, shown as first seen).
// Without GROUP BY the answer is exactly one row, even when no shard returned any.
func (p *Plan) Combine(shards [][]Row) ([]Row, error) {
	g := newGrouper(p)
	if err := g.addPartials(shards); err != nil {
		return nil, err
	}
	return g.rows(true), nil
}

func (g *grouper) addPartials(shards [][]Row) error {
	ng := len(g.p.GroupBy)
	w := ng + len(g.p.Partials)
	for s, rows := range shards {
		for r, row := range rows {
			at := "shards[" + strconv.Itoa(s) + "][" + strconv.Itoa(r) + "]"
			if len(row) != w {
				return fieldErrorf(at, "a partial row has %d columns; this plan's have %d (%d group columns, then %v)", len(row), w, ng, g.p.Partials)
			}
			gr := g.groupOf(row[:ng])
			for j, pa := range g.p.Partials {
				if err := gr.partials[j].fold(pa.Func, row[ng+j], false, func() string { return at + "[" + strconv.Itoa(ng+j) + "]" }); err != nil {
					return err
				}
			}
			// SUM(c) is NULL exactly when COUNT(c) is 0; AVG divides one by the other, so partials
			// that disagree are refused rather than guessed at.
			for _, f := range g.p.finals {
				if f.fn != Avg {
					continue
				}
				if n, _ := row[ng+f.q].AsInt64(); (n == 0) != row[ng+f.p].IsNull() {
					return fieldErrorf(at, "%v is %v but %v is %v: the partials of avg(#%d) disagree (sum is NULL exactly when count is 0)",
						g.p.Partials[f.p], row[ng+f.p], g.p.Partials[f.q], row[ng+f.q], g.p.Partials[f.p].Col)
				}
			}
			if g.p.mut&mutAvgOfAverages != 0 {
				for i, f := range g.p.finals {
					if f.fn != Avg {
						continue
					}
					sum, cnt := row[ng+f.p], row[ng+f.q]
					if n, _ := cnt.AsInt64(); n > 0 && sum.IsNumber() {
						gr.avgs[i].add(avgOf(sum, n))
						gr.navg[i]++
					}
				}
			}
		}
	}
	return nil
}

// rows returns the groups in order; final selects the requested aggregates instead of the
// partials.
func (g *grouper) rows(final bool) []Row {
	if len(g.p.GroupBy) == 0 && len(g.groups) == 0 {
		g.groupOf(nil)
	}
	by := make(OrderBy, len(g.p.GroupBy))
	for i := range by {
		by[i] = Key{Col: i}
	}
	slices.SortStableFunc(g.groups, func(a, b *group) int { return by.Compare(a.key, b.key) })
	out := make([]Row, len(g.groups))
	for gi, gr := range g.groups {
		row := slices.Clone(gr.key)
		if !final {
			for j, pa := range g.p.Partials {
				row = append(row, gr.partials[j].value(pa.Func))
			}
			out[gi] = row
			continue
		}
		for i, f := range g.p.finals {
			switch f.fn {
			case Avg:
				n := gr.partials[f.q].count
				switch {
				case g.p.mut&mutAvgOfAverages != 0 && gr.navg[i] > 0:
					row = append(row, avgOf(gr.avgs[i].value(), gr.navg[i]))
				case n == 0:
					row = append(row, Value{})
				default:
					row = append(row, avgOf(gr.partials[f.p].sum.value(), n))
				}
			default:
				row = append(row, gr.partials[f.p].value(f.fn))
			}
		}
		out[gi] = row
	}
	return out
}

// Aggregate is the whole cross-shard aggregation over raw per-shard rows: Decompose, ShardRows
// on every shard, Combine. It returns the plan too, for its Partials.
func Aggregate(a Aggregation, shards [][]Row) ([]Row, *Plan, error) {
	return aggregateWith(a, shards, 0)
}

func aggregateWith(a Aggregation, shards [][]Row, mut mutation) ([]Row, *Plan, error) {
	p, err := decompose(a, mut)
	if err != nil {
		return nil, nil, err
	}
	partials := make([][]Row, len(shards))
	for s, rows := range shards {
		g := newGrouper(p)
		if err := g.addRaw(rows, "shards["+strconv.Itoa(s)+"]"); err != nil {
			return nil, nil, err
		}
		partials[s] = g.rows(false)
	}
	out, err := p.Combine(partials)
	return out, p, err
}
