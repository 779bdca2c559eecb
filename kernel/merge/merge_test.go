package merge

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func mergeDiff(c mergeCase, mut mutation) string {
	got, err := mergeWith(c.Shards, c.By, c.Limit, mut)
	if err != nil {
		return "error: " + err.Error()
	}
	rows, from := naiveMerge(c.Shards, c.By, c.Limit)
	if !identicalRows(got.Rows, rows) || !slices.Equal(got.From, from) {
		return fmt.Sprintf("merge gave %v from %v\nconcatenate+stable sort+offset/limit gives %v from %v", got.Rows, got.From, rows, from)
	}
	return ""
}

// TestMergeMatchesNaive: the merge equals concatenating the shards, sorting stably and
// applying OFFSET/LIMIT, including which shard each row came from.
func TestMergeMatchesNaive(t *testing.T) {
	checkProperty(t, genMergeCase(), func(c mergeCase) string { return mergeDiff(c, 0) })
}

// TestMergeMutantTieHighShardFirstIsCaught shows the property above is not vacuous: letting the
// higher shard win ties breaks it on generated cases.
func TestMergeMutantTieHighShardFirstIsCaught(t *testing.T) {
	requireCaught(t, "mutTieHighShardFirst", genMergeCase(), 500, func(c mergeCase) string { return mergeDiff(c, mutTieHighShardFirst) })
}

func perShardDiff(c mergeCase, mut mutation) string {
	full, err := mergeWith(c.Shards, c.By, c.Limit, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	pl := c.Limit.perShard(mut)
	if pl.Offset != 0 {
		return fmt.Sprintf("PerShard(%s) = %s pushes an OFFSET down", c.Limit, pl)
	}
	cut := make([][]Row, len(c.Shards))
	for s, rows := range c.Shards {
		cut[s] = rows
		if pl.Count >= 0 && pl.Count < int64(len(rows)) {
			cut[s] = rows[:pl.Count]
		}
	}
	got, err := mergeWith(cut, c.By, c.Limit, 0)
	if err != nil {
		return "error: " + err.Error()
	}
	if !identicalRows(got.Rows, full.Rows) || !slices.Equal(got.From, full.From) {
		return fmt.Sprintf("with every shard cut to %s the merge gives %v from %v, but %v from %v in full", pl, got.Rows, got.From, full.Rows, full.From)
	}
	return ""
}

// TestPerShardLimitSuffices: shards that return only Limit.PerShard() rows give the same answer
// as shards that return everything.
func TestPerShardLimitSuffices(t *testing.T) {
	checkProperty(t, genMergeCase(), func(c mergeCase) string { return perShardDiff(c, 0) })
}

func TestPerShardLimitMutantIgnoresOffsetIsCaught(t *testing.T) {
	requireCaught(t, "mutPerShardLimitIgnoresOffset", genMergeCase(), 500, func(c mergeCase) string { return perShardDiff(c, mutPerShardLimitIgnoresOffset) })
}

// TestPerShardLimitIsTight: one row fewer than Count+Offset per shard is not enough, because
// the whole answer may come from one shard.
func TestPerShardLimitIsTight(t *testing.T) {
	shard := []Row{{Int(1)}, {Int(2)}, {Int(3)}, {Int(4)}}
	by := OrderBy{{Col: 0}}
	for _, l := range []Limit{{Count: 1, Offset: 1}, {Count: 2, Offset: 0}, {Count: 1, Offset: 2}} {
		pl := l.PerShard()
		require.Equal(t, Limit{Count: l.Count + l.Offset}, pl)
		full, err := Merge([][]Row{shard, nil}, by, l)
		require.NoError(t, err)
		short, err := Merge([][]Row{shard[:pl.Count-1], nil}, by, l)
		require.NoError(t, err)
		require.NotEqual(t, full.Rows, short.Rows, "%s: %d rows per shard should not suffice", l, pl.Count-1)
	}
}

func TestPerShardLimitEdges(t *testing.T) {
	require.Equal(t, Limit{Count: All}, Limit{Count: All, Offset: 10}.PerShard(), "no LIMIT: shards return everything")
	require.Equal(t, Limit{Count: All}, Limit{Count: math.MaxInt64, Offset: 1}.PerShard(), "overflow: shards return everything")
	require.Equal(t, Limit{Count: 0}, Limit{Count: 0, Offset: 7}.PerShard(), "LIMIT 0 needs no rows")
	require.Equal(t, "LIMIT 3 OFFSET 2", Limit{Count: 3, Offset: 2}.String())
	require.Equal(t, "LIMIT ALL", Limit{Count: All}.String())
}

// TestMergeNullsDefaults pins Postgres's defaults: NULLS LAST for ASC, NULLS FIRST for DESC.
func TestMergeNullsDefaults(t *testing.T) {
	shards := [][]Row{{{Int(1)}, {Null()}}, {{Int(2)}}}
	res, err := Merge(shards, OrderBy{{Col: 0}}, Limit{Count: All})
	require.NoError(t, err)
	require.Equal(t, []Row{{Int(1)}, {Int(2)}, {Null()}}, res.Rows)

	shards = [][]Row{{{Null()}, {Int(1)}}, {{Int(2)}}}
	res, err = Merge(shards, OrderBy{{Col: 0, Desc: true}}, Limit{Count: All})
	require.NoError(t, err)
	require.Equal(t, []Row{{Null()}, {Int(2)}, {Int(1)}}, res.Rows)
	require.Equal(t, []int{0, 1, 0}, res.From)
}

func TestMergeRejectsUnsortedShard(t *testing.T) {
	shards := [][]Row{{{Int(1)}, {Int(2)}}, {{Int(5)}, {Int(3)}, {Int(9)}}}
	_, err := Merge(shards, OrderBy{{Col: 0}}, Limit{Count: 1})
	var ue *UnsortedError
	require.ErrorAs(t, err, &ue, "a shard sorted wrongly must be reported even when the LIMIT would not read it")
	require.Equal(t, UnsortedError{Shard: 1, Row: 1}, *ue)
	require.ErrorIs(t, err, ErrUnsorted)
	require.Contains(t, err.Error(), "shards[1][1] sorts before shards[1][0]")
}

// TestMergeReportsShortRowsBeforeUnsorted pins the precedence the protocol promises.
func TestMergeReportsShortRowsBeforeUnsorted(t *testing.T) {
	shards := [][]Row{{{Int(2), Int(0)}, {Int(1), Int(0)}}, {{Int(1)}}}
	_, err := Merge(shards, OrderBy{{Col: 1}, {Col: 0}}, Limit{Count: All})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "shards[1][0]", fe.Field)
	require.ErrorIs(t, err, ErrBadInput)
	require.Contains(t, err.Error(), "row has 1 columns but ORDER BY #1 ASC NULLS LAST, #0 ASC NULLS LAST needs 2")
}

func TestMergeRejectsBadOrderAndOffset(t *testing.T) {
	_, err := Merge(nil, OrderBy{{Col: -1}}, Limit{Count: All})
	require.ErrorContains(t, err, "order[0].col: column -1 is negative")
	_, err = Merge(nil, OrderBy{{Col: 0, Nulls: 9}}, Limit{Count: All})
	require.ErrorContains(t, err, "order[0].nulls")
	_, err = Merge(nil, OrderBy{}, Limit{Count: 1, Offset: -1})
	require.ErrorContains(t, err, "offset: -1 is negative")
	require.True(t, errors.Is(err, ErrBadInput))
}

// TestMergeEmptyOrderKeepsShardOrder: with no keys every row ties, so the merge is the
// concatenation.
func TestMergeEmptyOrderKeepsShardOrder(t *testing.T) {
	shards := [][]Row{{{Int(3)}, {Int(1)}}, {}, {{Int(2)}, nil}}
	res, err := Merge(shards, nil, Limit{Count: All})
	require.NoError(t, err)
	require.Equal(t, []Row{{Int(3)}, {Int(1)}, {Int(2)}, nil}, res.Rows)
	require.Equal(t, []int{0, 0, 2, 2}, res.From)
}

// TestMergeAllocatesNothingPerRow: the allocations of a merge do not grow with the rows.
func TestMergeAllocatesNothingPerRow(t *testing.T) {
	allocs := func(perShard int) float64 {
		shards := benchShards(8, 8*perShard, 1)
		by := benchOrder
		return testing.AllocsPerRun(5, func() {
			if _, err := Merge(shards, by, Limit{Count: All}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(10), allocs(10_000)
	require.Equal(t, small, large, "allocations grew with the rows: %v for 80 rows, %v for 80,000", small, large)
	require.LessOrEqual(t, large, 5.0, "the result's two slices and the tree's three")
}

// unsortedCase is a merge case where one shard may have two rows swapped.
func genUnsortedCase() *rapid.Generator[mergeCase] {
	return rapid.Custom(func(t *rapid.T) mergeCase {
		c := genMergeCase().Draw(t, "case")
		if len(c.Shards) == 0 {
			return c
		}
		s := rapid.IntRange(0, len(c.Shards)-1).Draw(t, "swapShard")
		if rows := c.Shards[s]; len(rows) >= 2 {
			i := rapid.IntRange(0, len(rows)-1).Draw(t, "swapI")
			j := rapid.IntRange(0, len(rows)-1).Draw(t, "swapJ")
			rows[i], rows[j] = rows[j], rows[i]
		}
		return c
	})
}

func unsortedDiff(c mergeCase, mut mutation) string {
	want := -1
	var wantErr UnsortedError
	for s, rows := range c.Shards {
		for r := 1; r < len(rows) && want < 0; r++ {
			if naiveLess(c.By, rows[r], rows[r-1]) {
				want, wantErr = 1, UnsortedError{Shard: s, Row: r}
			}
		}
	}
	_, err := mergeWith(c.Shards, c.By, c.Limit, mut)
	var ue *UnsortedError
	switch {
	case want < 0 && err != nil:
		return "sorted shards, yet: " + err.Error()
	case want >= 0 && !errors.As(err, &ue):
		return fmt.Sprintf("shards[%d][%d] is out of order, but the merge returned %v", wantErr.Shard, wantErr.Row, err)
	case want >= 0 && *ue != wantErr:
		return fmt.Sprintf("the first row out of order is shards[%d][%d], the merge named shards[%d][%d]", wantErr.Shard, wantErr.Row, ue.Shard, ue.Row)
	}
	return ""
}

// TestMergeReportsFirstUnsortedRow: the merge fails exactly when a shard is out of order,
// whatever the LIMIT reads, and names the first such row.
func TestMergeReportsFirstUnsortedRow(t *testing.T) {
	checkProperty(t, genUnsortedCase(), func(c mergeCase) string { return unsortedDiff(c, 0) })
}

func TestMergeMutantUncheckedTailIsCaught(t *testing.T) {
	requireCaught(t, "mutUncheckedTail", genUnsortedCase(), 1000, func(c mergeCase) string { return unsortedDiff(c, mutUncheckedTail) })
}
