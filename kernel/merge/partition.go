package merge

import (
	"math/big"
	"slices"
	"strconv"
)

// Span is the half-open integer interval [Lo, Hi). Integers are unbounded so one definition
// serves int8 range mappings, 64-bit keyspace IDs ([0, 2^64)) and hash remainders alike.
type Span struct {
	Lo, Hi *big.Int
}

func (s Span) String() string { return "[" + s.Lo.String() + ", " + s.Hi.String() + ")" }

// Finding is the answer of a partition check. The definition, so that another implementation
// (the proved oracle in proof/) can give the same answer:
//
//   - If some part has no range, the parts are not a partition and EmptyPart is the lowest such
//     part's index.
//   - Otherwise let cover(p) be the number of ranges (over all parts) containing the integer p,
//     and want(p) be 1 for p in the space and 0 outside it. The parts are a partition exactly
//     when cover(p) = want(p) for every integer p. If not, At is the smallest p where they
//     differ, and Owners lists, in ascending order, the part index of every range containing At
//     (once per range, so a part whose own ranges overlap appears twice). Owners is empty for a
//     gap; a range reaching outside the space is reported at the first point outside.
type Finding struct {
	Partition bool
	EmptyPart int      // -1 unless a part has no range
	At        *big.Int // nil when Partition or EmptyPart ≥ 0
	Owners    []int
}

// CheckPartition reports whether parts (each a list of ranges, e.g. the ranges one shard
// owns) partition space: every integer of the space is owned by exactly one range, and nothing
// outside it by any. Every range and the space must be non-empty (Lo < Hi); a *FieldError names
// the first that is not.
func CheckPartition(space Span, parts [][]Span) (Finding, error) {
	return checkPartition(space, parts, 0)
}

// CheckModulus is CheckPartition for hash sharding: parts list the remainders each shard owns
// and the space is the remainders 0..modulus-1. Remainder r stands for the range [r, r+1).
func CheckModulus(modulus *big.Int, parts [][]*big.Int) (Finding, error) {
	if modulus == nil || modulus.Sign() <= 0 {
		return Finding{}, fieldErrorf("modulus", "must be a positive integer, not %v", modulus)
	}
	spans := make([][]Span, len(parts))
	one := big.NewInt(1)
	for i, rs := range parts {
		spans[i] = make([]Span, len(rs))
		for j, r := range rs {
			if r == nil {
				return Finding{}, fieldErrorf("parts["+strconv.Itoa(i)+"]["+strconv.Itoa(j)+"]", "missing remainder")
			}
			spans[i][j] = Span{Lo: r, Hi: new(big.Int).Add(r, one)}
		}
	}
	return checkPartition(Span{Lo: new(big.Int), Hi: modulus}, spans, 0)
}

func checkPartition(space Span, parts [][]Span, mut mutation) (Finding, error) {
	if space.Lo == nil || space.Hi == nil || space.Lo.Cmp(space.Hi) >= 0 {
		return Finding{}, fieldErrorf("space", "%s is not a non-empty range [lo, hi) with lo < hi", spanText(space))
	}
	var los, his []*big.Int
	for i, rs := range parts {
		for j, r := range rs {
			if r.Lo == nil || r.Hi == nil || r.Lo.Cmp(r.Hi) >= 0 {
				return Finding{}, fieldErrorf("parts["+strconv.Itoa(i)+"]["+strconv.Itoa(j)+"]", "%s is not a non-empty range [lo, hi) with lo < hi", spanText(r))
			}
			los, his = append(los, r.Lo), append(his, r.Hi)
		}
	}
	for i, rs := range parts {
		if len(rs) == 0 {
			return Finding{EmptyPart: i}, nil
		}
	}
	// cover and want change only at range ends and space ends, so the smallest point where they
	// differ is one of those. Sweep them in order: cover(p) = #{lo ≤ p} - #{hi ≤ p}.
	closed := mut&mutClosedRanges != 0
	points := append(append([]*big.Int{space.Lo, space.Hi}, los...), his...)
	slices.SortFunc(points, (*big.Int).Cmp)
	points = slices.CompactFunc(points, func(a, b *big.Int) bool { return a.Cmp(b) == 0 })
	slices.SortFunc(los, (*big.Int).Cmp)
	slices.SortFunc(his, (*big.Int).Cmp)
	nlo, nhi := 0, 0
	for _, p := range points {
		for nlo < len(los) && los[nlo].Cmp(p) <= 0 {
			nlo++
		}
		for nhi < len(his) && (his[nhi].Cmp(p) < 0 || !closed && his[nhi].Cmp(p) == 0) {
			nhi++
		}
		want := 0
		if space.Lo.Cmp(p) <= 0 && p.Cmp(space.Hi) < 0 {
			want = 1
		}
		if nlo-nhi == want {
			continue
		}
		f := Finding{EmptyPart: -1, At: new(big.Int).Set(p), Owners: []int{}}
		for i, rs := range parts {
			for _, r := range rs {
				if r.Lo.Cmp(p) <= 0 && (p.Cmp(r.Hi) < 0 || closed && p.Cmp(r.Hi) == 0) {
					f.Owners = append(f.Owners, i)
				}
			}
		}
		return f, nil
	}
	return Finding{Partition: true, EmptyPart: -1}, nil
}

func spanText(s Span) string {
	t := func(x *big.Int) string {
		if x == nil {
			return "missing"
		}
		return x.String()
	}
	return "[" + t(s.Lo) + ", " + t(s.Hi) + ")"
}
