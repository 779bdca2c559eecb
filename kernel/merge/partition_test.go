package merge

import (
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

type partitionCase struct {
	Space Span
	Parts [][]Span
}

func (c partitionCase) String() string { return fmt.Sprintf("space %v parts %v", c.Space, c.Parts) }

func rng(lo, hi int64) Span { return Span{Lo: big.NewInt(lo), Hi: big.NewInt(hi)} }

// genPartitionCase draws a small space and parts whose ranges mostly tile it, so that exact
// partitions, gaps, overlaps and ranges reaching outside all occur.
func genPartitionCase() *rapid.Generator[partitionCase] {
	return rapid.Custom(func(t *rapid.T) partitionCase {
		lo := rapid.Int64Range(-5, 5).Draw(t, "lo")
		hi := lo + rapid.Int64Range(1, 12).Draw(t, "width")
		// Cut the space into pieces, then disturb some ends.
		var pieces []Span
		for at := lo; at < hi; {
			end := min(hi, at+rapid.Int64Range(1, 4).Draw(t, "piece"))
			pieces = append(pieces, rng(at, end))
			at = end
		}
		for i := range pieces {
			if rapid.IntRange(0, 5).Draw(t, fmt.Sprintf("disturb%d", i)) == 0 {
				a := pieces[i].Lo.Int64() + rapid.Int64Range(-2, 2).Draw(t, fmt.Sprintf("dlo%d", i))
				b := pieces[i].Hi.Int64() + rapid.Int64Range(-2, 2).Draw(t, fmt.Sprintf("dhi%d", i))
				if a < b {
					pieces[i] = rng(a, b)
				}
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "drop") == 0 && len(pieces) > 0 {
			i := rapid.IntRange(0, len(pieces)-1).Draw(t, "dropAt")
			pieces = slices.Delete(pieces, i, i+1)
		}
		nparts := rapid.IntRange(1, 4).Draw(t, "parts")
		parts := make([][]Span, nparts)
		for i, p := range pieces {
			j := rapid.IntRange(0, nparts-1).Draw(t, fmt.Sprintf("owner%d", i))
			parts[j] = append(parts[j], p)
		}
		if rapid.IntRange(0, 3).Draw(t, "extra") == 0 {
			a := rapid.Int64Range(lo-3, hi+2).Draw(t, "extraLo")
			j := rapid.IntRange(0, nparts-1).Draw(t, "extraOwner")
			parts[j] = append(parts[j], rng(a, a+rapid.Int64Range(1, 3).Draw(t, "extraLen")))
		}
		return partitionCase{Space: rng(lo, hi), Parts: parts}
	})
}

// naivePartition follows Finding's definition point by point over every integer that could
// matter.
func naivePartition(c partitionCase) Finding {
	for i, rs := range c.Parts {
		if len(rs) == 0 {
			return Finding{EmptyPart: i}
		}
	}
	from, to := c.Space.Lo.Int64(), c.Space.Hi.Int64()
	for _, rs := range c.Parts {
		for _, r := range rs {
			from, to = min(from, r.Lo.Int64()), max(to, r.Hi.Int64())
		}
	}
	for p := from; p <= to; p++ {
		owners := []int{}
		for i, rs := range c.Parts {
			for _, r := range rs {
				if r.Lo.Int64() <= p && p < r.Hi.Int64() {
					owners = append(owners, i)
				}
			}
		}
		want := 0
		if c.Space.Lo.Int64() <= p && p < c.Space.Hi.Int64() {
			want = 1
		}
		if len(owners) != want {
			return Finding{EmptyPart: -1, At: big.NewInt(p), Owners: owners}
		}
	}
	return Finding{Partition: true, EmptyPart: -1}
}

func partitionDiff(c partitionCase, mut mutation) string {
	got, err := checkPartition(c.Space, c.Parts, mut)
	if err != nil {
		return "error: " + err.Error()
	}
	want := naivePartition(c)
	same := got.Partition == want.Partition && got.EmptyPart == want.EmptyPart && slices.Equal(got.Owners, want.Owners) &&
		(got.At == nil) == (want.At == nil) && (got.At == nil || got.At.Cmp(want.At) == 0)
	if !same {
		return fmt.Sprintf("check: %+v\npoint by point: %+v", got, want)
	}
	return ""
}

// TestPartitionMatchesDefinition: the sweep gives the answer of checking every point.
func TestPartitionMatchesDefinition(t *testing.T) {
	checkProperty(t, genPartitionCase(), func(c partitionCase) string { return partitionDiff(c, 0) })
}

func TestPartitionMutantClosedRangesIsCaught(t *testing.T) {
	requireCaught(t, "mutClosedRanges", genPartitionCase(), 500, func(c partitionCase) string { return partitionDiff(c, mutClosedRanges) })
}

// TestCheckModulusMatchesCounting: a remainder list partitions 0..m-1 exactly when every
// remainder appears once and nothing else appears.
func TestCheckModulusMatchesCounting(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.Int64Range(1, 8).Draw(t, "m")
		parts := rapid.SliceOfN(rapid.SliceOfN(rapid.Int64Range(-1, m), 0, 4), 1, 4).Draw(t, "parts")
		var bparts [][]*big.Int
		counts := map[int64]int{}
		empty := false
		for _, rs := range parts {
			var b []*big.Int
			for _, r := range rs {
				b = append(b, big.NewInt(r))
				counts[r]++
			}
			empty = empty || len(rs) == 0
			bparts = append(bparts, b)
		}
		exact := !empty
		for r := int64(-1); r <= m; r++ {
			want := 0
			if r >= 0 && r < m {
				want = 1
			}
			exact = exact && counts[r] == want
		}
		f, err := CheckModulus(big.NewInt(m), bparts)
		require.NoError(t, err)
		require.Equal(t, exact, f.Partition, "m=%d parts=%v: %+v", m, parts, f)
	})
}

func TestPartitionBigKeyspace(t *testing.T) {
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	half := new(big.Int).Lsh(big.NewInt(1), 63)
	space := Span{Lo: new(big.Int), Hi: two64}
	f, err := CheckPartition(space, [][]Span{{{Lo: new(big.Int), Hi: half}}, {{Lo: half, Hi: two64}}})
	require.NoError(t, err)
	require.True(t, f.Partition, "-80 and 80- cover the keyspace")
	f, err = CheckPartition(space, [][]Span{{{Lo: new(big.Int), Hi: half}}, {{Lo: new(big.Int).Add(half, big.NewInt(1)), Hi: two64}}})
	require.NoError(t, err)
	require.Equal(t, half, f.At)
	require.Equal(t, []int{}, f.Owners)
}

func TestPartitionFindings(t *testing.T) {
	f, err := CheckPartition(rng(0, 10), [][]Span{{rng(0, 5)}, {}, {rng(5, 10)}})
	require.NoError(t, err)
	require.Equal(t, Finding{EmptyPart: 1}, f)
	f, err = CheckPartition(rng(0, 10), [][]Span{{rng(0, 5), rng(4, 10)}})
	require.NoError(t, err)
	require.Equal(t, []int{0, 0}, f.Owners, "a part overlapping itself is named twice")
	require.Equal(t, int64(4), f.At.Int64())
	f, err = CheckPartition(rng(0, 10), [][]Span{{rng(-2, 5)}, {rng(5, 10)}})
	require.NoError(t, err)
	require.Equal(t, int64(-2), f.At.Int64(), "a range reaching outside is reported where it starts")
	require.Equal(t, []int{0}, f.Owners)
}

func TestPartitionRejectsEmptyRanges(t *testing.T) {
	_, err := CheckPartition(rng(3, 3), nil)
	require.ErrorContains(t, err, "space: [3, 3) is not a non-empty range")
	_, err = CheckPartition(rng(0, 3), [][]Span{{rng(0, 3)}, {rng(2, 1)}})
	require.ErrorContains(t, err, "parts[1][0]: [2, 1) is not a non-empty range")
	_, err = CheckPartition(rng(0, 3), [][]Span{{{Lo: big.NewInt(0)}}})
	require.ErrorContains(t, err, "parts[0][0]: [0, missing)")
	_, err = CheckModulus(big.NewInt(0), nil)
	require.ErrorContains(t, err, "modulus: must be a positive integer")
	_, err = CheckModulus(big.NewInt(2), [][]*big.Int{{nil}})
	require.ErrorContains(t, err, "parts[0][0]: missing remainder")
}
