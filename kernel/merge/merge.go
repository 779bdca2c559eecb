package merge

import (
	"strconv"
)

// All as a Limit's Count means no LIMIT (LIMIT ALL).
const All = -1

// Limit is LIMIT Count OFFSET Offset. A negative Count means no LIMIT; use All.
type Limit struct {
	Count  int64
	Offset int64
}

func (l Limit) String() string {
	s := "LIMIT ALL"
	if l.Count >= 0 {
		s = "LIMIT " + strconv.FormatInt(l.Count, 10)
	}
	if l.Offset != 0 {
		s += " OFFSET " + strconv.FormatInt(l.Offset, 10)
	}
	return s
}

// PerShard returns what each shard must be asked for so that the merge can answer l:
// LIMIT Count+Offset and no OFFSET. Any of the first Count+Offset merged rows may come from a
// single shard, so no shard may return fewer; and no row beyond its shard's first
// Count+Offset can reach the answer, because Count+Offset rows of that shard alone already
// precede it. OFFSET cannot be pushed down: which rows it skips depends on every shard. Without
// a LIMIT, or when Count+Offset overflows int64, shards must return every row.
func (l Limit) PerShard() Limit { return l.perShard(0) }

func (l Limit) perShard(mut mutation) Limit {
	if l.Count < 0 {
		return Limit{Count: All}
	}
	if l.Count == 0 {
		return Limit{Count: 0} // no row can reach the answer
	}
	if mut&mutPerShardLimitIgnoresOffset != 0 {
		return Limit{Count: l.Count}
	}
	n := l.Count + l.Offset
	if n < l.Count { // overflow
		return Limit{Count: All}
	}
	return Limit{Count: n}
}

// Result is a merged answer.
type Result struct {
	Rows []Row
	From []int // From[i] is the shard Rows[i] came from
}

// Merge answers a cross-shard ORDER BY … LIMIT … OFFSET … from per-shard results, each sorted
// by the same ORDER BY (and limited to at most l.PerShard()). The answer is exactly "concatenate
// the shards in index order, sort stably, skip Offset rows, keep Count": rows that tie on every
// key come out in shard index order, then in their order within the shard.
//
// Every row must have each key's column, and every shard must be sorted (all of it, not only the
// rows the LIMIT reads): otherwise Merge returns a *FieldError for the first row (in shard
// order, then row order) that is too short or, when none is, an *UnsortedError for the first
// row that sorts before the row above it.
//
// Merge allocates the result and O(len(shards)) of bookkeeping, nothing per row: a loser tree
// picks each row with about log2(len(shards)) comparisons.
func Merge(shards [][]Row, by OrderBy, l Limit) (Result, error) { return mergeWith(shards, by, l, 0) }

func mergeWith(shards [][]Row, by OrderBy, l Limit, mut mutation) (Result, error) {
	width, err := by.width()
	if err != nil {
		return Result{}, err
	}
	if l.Offset < 0 {
		return Result{}, fieldErrorf("offset", "%d is negative (OFFSET must be ≥ 0)", l.Offset)
	}
	// Rows too short are found first: that fault outranks an unsorted shard.
	total := 0
	for s, rows := range shards {
		for r, row := range rows {
			if len(row) < width {
				return Result{}, fieldErrorf("shards["+strconv.Itoa(s)+"]["+strconv.Itoa(r)+"]",
					"row has %d columns but %s needs %d", len(row), by, width)
			}
		}
		total += len(rows)
	}
	skip := int(min(l.Offset, int64(total)))
	n := total - skip
	if l.Count >= 0 {
		n = int(min(int64(n), l.Count))
	}
	res := Result{Rows: make([]Row, n), From: make([]int, n)}
	// The merge checks each row it pops against the next row of its shard while both are in
	// cache, then the rows it did not read; only when that finds a fault does firstUnsorted
	// look for the first one in shard order.
	t := newLoserTree(shards, by, mut&mutTieHighShardFirst != 0)
	if n > 0 {
		for range skip {
			t.pop()
		}
		for i := range n {
			res.Rows[i], res.From[i] = t.pop()
		}
	}
	for i := range t.leaves {
		if mut&mutUncheckedTail != 0 {
			break
		}
		lf := &t.leaves[i]
		for r := lf.pos + 1; r < len(lf.rows) && !t.unsorted; r++ {
			t.unsorted = by.Compare(lf.rows[r-1], lf.rows[r]) > 0
		}
	}
	if t.unsorted {
		return Result{}, firstUnsorted(shards, by)
	}
	return res, nil
}

func firstUnsorted(shards [][]Row, by OrderBy) error {
	for s, rows := range shards {
		for r := 1; r < len(rows); r++ {
			if by.Compare(rows[r-1], rows[r]) > 0 {
				return &UnsortedError{Shard: s, Row: r}
			}
		}
	}
	return nil
}

// leaf is one shard's stream in the loser tree.
type leaf struct {
	// The head's first-key value when it is an integer, kept here so that most matches are
	// settled without touching the row. The fields a match reads come first, in one cache line.
	key0   int64
	isInt0 bool
	done   bool
	head   Row // rows[pos], kept here to save a load per comparison
	rows   []Row
	pos    int
}

// setHead moves the leaf to rows[pos].
func (lf *leaf) setHead(col0 int) {
	if lf.pos >= len(lf.rows) {
		lf.head, lf.done, lf.isInt0 = nil, true, false
		return
	}
	lf.head = lf.rows[lf.pos]
	lf.isInt0 = false
	if col0 >= 0 {
		v := &lf.head[col0]
		lf.key0, lf.isInt0 = v.i, v.kind == KindInt
	}
}

// loserTree is a tournament tree over k leaves (Knuth, TAOCP vol. 3, §5.4.1): node[0] holds
// the leaf whose head comes first, node[1..k-1] hold the loser of the match played there. Leaf
// i sits below node (i+k)/2. Popping replays only the matches on one leaf's path to the root.
type loserTree struct {
	by       OrderBy
	leaves   []leaf
	node     []int
	unsorted bool // a popped row sorts after the next row of its shard
	tieHigh  bool // mutant: ties go to the higher shard index
	// The first key, for a comparison that settles most matches without a call when that
	// column holds distinct integers; col0 is -1 without keys.
	col0  int
	less0 int     // what a smaller integer in col0 returns: -1 for ASC, 1 for DESC
	rest  OrderBy // the keys after the first, for rows whose first keys are equal integers
}

func newLoserTree(shards [][]Row, by OrderBy, tieHigh bool) *loserTree {
	k := len(shards)
	t := &loserTree{by: by, leaves: make([]leaf, k), node: make([]int, k), tieHigh: tieHigh, col0: -1}
	if len(by) > 0 {
		t.col0, t.less0, t.rest = by[0].Col, -1, by[1:]
		if by[0].Desc {
			t.less0 = 1
		}
	}
	for i, rows := range shards {
		t.leaves[i].rows = rows
		t.leaves[i].setHead(t.col0)
	}
	t.build()
	return t
}

// beats reports whether leaf a's head comes before leaf b's: by the ORDER BY, then by shard
// index. An exhausted leaf comes after everything; the virtual leaf k before everything.
func (t *loserTree) beats(a, b int) bool {
	k := len(t.leaves)
	if a == k || b == k {
		return a == k
	}
	la, lb := &t.leaves[a], &t.leaves[b]
	if la.done || lb.done {
		return !la.done || lb.done && a < b
	}
	if c := t.by.Compare(la.head, lb.head); c != 0 {
		return c < 0
	}
	return (a < b) != t.tieHigh
}

// replay plays leaf s up to the root after its head changed: at each node the loser stays and
// the winner goes on. It is beats written out, with the first key's integer case inline,
// because this loop is the merge's cost; after newLoserTree no node holds the virtual leaf, so it needs no case for it.
func (t *loserTree) replay(s int) {
	k := len(t.leaves)
	leaves, node, by, rest := t.leaves, t.node, t.by, t.rest
	less0, tieHigh := t.less0, t.tieHigh
	for p := (s + k) >> 1; p > 0; p >>= 1 {
		o := node[p]
		lo, ls := &leaves[o], &leaves[s]
		var oWins bool
		if lo.done || ls.done {
			oWins = !lo.done || ls.done && o < s
		} else {
			var c int
			switch {
			case !lo.isInt0 || !ls.isInt0:
				c = by.Compare(lo.head, ls.head)
			case lo.key0 < ls.key0:
				c = less0
			case lo.key0 > ls.key0:
				c = -less0
			default:
				c = rest.Compare(lo.head, ls.head)
			}
			oWins = c < 0 || c == 0 && (o < s) != tieHigh
		}
		if oWins {
			node[p], s = s, o
		}
	}
	node[0] = s
}

// build plays every leaf in, starting from nodes that all hold the virtual leaf k, which beats
// everything and so is pushed out to the root and then replaced by real winners.
func (t *loserTree) build() {
	k := len(t.leaves)
	for i := range t.node {
		t.node[i] = k
	}
	for i := k - 1; i >= 0; i-- {
		s := i
		for p := (s + k) >> 1; p > 0; p >>= 1 {
			if o := t.node[p]; t.beats(o, s) {
				t.node[p], s = s, o
			}
		}
		t.node[0] = s
	}
}

// pop returns the next row and its shard. The caller must not pop more rows than there are.
func (t *loserTree) pop() (Row, int) {
	w := t.node[0]
	lf := &t.leaves[w]
	row := lf.head
	key0, isInt0 := lf.key0, lf.isInt0
	lf.pos++
	lf.setHead(t.col0)
	if !lf.done {
		// The popped row and the new head are both in cache: check the shard's order here.
		switch {
		case !isInt0 || !lf.isInt0:
			t.unsorted = t.unsorted || t.by.Compare(row, lf.head) > 0
		case key0 != lf.key0:
			t.unsorted = t.unsorted || (key0 < lf.key0) != (t.less0 < 0)
		default:
			t.unsorted = t.unsorted || t.rest.Compare(row, lf.head) > 0
		}
	}
	t.replay(w)
	return row, w
}
