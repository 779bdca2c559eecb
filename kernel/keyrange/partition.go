package keyrange

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// PartitionError says why a list of ranges does not partition the keyspace exactly.
// Index is the position of the offending range in the list (or -1 for an empty list).
type PartitionError struct {
	Index  int
	Reason string
}

func (e *PartitionError) Error() string {
	if e.Index < 0 {
		return "keyrange: " + e.Reason
	}
	return fmt.Sprintf("keyrange: ranges[%d]: %s", e.Index, e.Reason)
}

// CheckPartition reports whether rs, in order, cover the whole keyspace with no gap and
// no overlap: the first starts at the minimum, each starts where the previous one ends,
// and the last runs to the end. The error names the first offending range.
func CheckPartition(rs []Range) error {
	if len(rs) == 0 {
		return &PartitionError{Index: -1, Reason: "no ranges: a partition needs at least one (\"-\" for one shard)"}
	}
	if rs[0].start != 0 {
		return &PartitionError{Index: 0, Reason: fmt.Sprintf("%q does not start at the beginning of the keyspace (the first shard starts with \"-\")", rs[0])}
	}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		if prev.endLen == 0 {
			return &PartitionError{Index: i, Reason: fmt.Sprintf("%q comes after %q, which already runs to the end of the keyspace", cur, prev)}
		}
		switch {
		case cur.start < prev.start:
			return &PartitionError{Index: i, Reason: fmt.Sprintf("%q is out of order: it starts before ranges[%d] %q (sort by start)", cur, i-1, prev)}
		case cur.start < prev.end:
			return &PartitionError{Index: i, Reason: fmt.Sprintf("%q overlaps ranges[%d] %q", cur, i-1, prev)}
		case cur.start > prev.end:
			return &PartitionError{Index: i, Reason: fmt.Sprintf("gap between ranges[%d] %q and %q: keyspace IDs from %s are in no shard", i-1, prev, cur, formatBound(prev.end, max(prev.endLen, cur.startLen)))}
		}
	}
	if last := rs[len(rs)-1]; last.endLen != 0 {
		return &PartitionError{Index: len(rs) - 1, Reason: fmt.Sprintf("%q does not run to the end of the keyspace (the last shard ends with \"-\")", last)}
	}
	return nil
}

// Partition is a checked partition of the keyspace, ready for lookups.
type Partition struct {
	ranges []Range
	starts []uint64
}

// NewPartition checks rs with CheckPartition and indexes them for Lookup.
func NewPartition(rs []Range) (*Partition, error) {
	if err := CheckPartition(rs); err != nil {
		return nil, err
	}
	p := &Partition{ranges: slices.Clone(rs), starts: make([]uint64, len(rs))}
	for i, r := range rs {
		p.starts[i] = r.start
	}
	return p, nil
}

// Ranges returns the partition's ranges in order. The caller must not modify them.
func (p *Partition) Ranges() []Range { return p.ranges }

// Len returns the number of shards.
func (p *Partition) Len() int { return len(p.ranges) }

// Lookup returns the index of the shard whose range holds the keyspace ID. A partition
// covers everything, so there always is one. O(log n), no allocation.
func (p *Partition) Lookup(ksid [8]byte) int {
	return p.LookupID(binary.BigEndian.Uint64(ksid[:]))
}

// LookupID is Lookup for a keyspace ID already read as a big-endian integer.
func (p *Partition) LookupID(id uint64) int {
	// The last start that is <= id. starts[0] == 0, so the answer is >= 0.
	lo, hi := 0, len(p.starts)
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if p.starts[mid] <= id {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Split cuts r into n adjacent ranges of (nearly) equal size and names them as Vitess
// does: the boundaries are floor(i*units/n) in steps of the narrowest whole-byte width
// that gives every part at least one step, at least as wide as r's own bounds. Splitting
// the whole keyspace in 3 gives "-55", "55-aa", "aa-", as vtctl's GenerateShardRanges does;
// 512 parts use two-byte bounds ("-0080", "0080-0100", ...).
func Split(r Range, n int) ([]Range, error) {
	if n < 1 {
		return nil, fmt.Errorf("keyrange: cannot split %q into %d parts (need at least 1)", r, n)
	}
	if n == 1 {
		return []Range{r}, nil
	}
	sizeHi, sizeLo := r.size()
	w := max(r.startLen, r.endLen, 1)
	var units uint64 // size in steps of 2^(64-8w)
	for ; ; w++ {
		if w > 8 {
			return nil, fmt.Errorf("keyrange: %q holds fewer than %d keyspace IDs; it cannot be split %d ways", r, n, n)
		}
		shift := 64 - 8*uint(w)
		if shift == 0 {
			if sizeHi != 0 {
				units = 0 // 2^64 steps of one ID: more than any n; handled below
			} else {
				units = sizeLo
			}
		} else {
			units = sizeHi<<(64-shift) | sizeLo>>shift
		}
		if (sizeHi != 0 && shift == 0) || units >= uint64(n) {
			break
		}
	}
	shift := 64 - 8*uint(w)
	out := make([]Range, n)
	prev, prevLen := r.start, r.startLen
	for i := 1; i <= n; i++ {
		part := Range{start: prev, startLen: prevLen}
		if i == n {
			part.end, part.endLen = r.end, r.endLen
		} else {
			// offset = floor(i*units/n) steps, computed in 128 bits.
			var off uint64
			if units == 0 { // the whole space at one-ID steps: 2^64 * i / n
				off, _ = bits.Div64(uint64(i), 0, uint64(n))
			} else {
				hi, lo := bits.Mul64(uint64(i), units)
				off, _ = bits.Div64(hi, lo, uint64(n))
			}
			part.end, part.endLen = r.start+off<<shift, w
		}
		out[i-1] = part
		prev, prevLen = part.end, part.endLen
	}
	return out, nil
}

// Merge joins adjacent ranges, given in order, into one: the inverse of Split. It refuses
// ranges that are not adjacent and names the first pair that is not.
func Merge(rs []Range) (Range, error) {
	if len(rs) == 0 {
		return Range{}, &PartitionError{Index: -1, Reason: "nothing to merge"}
	}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1], rs[i]
		if prev.endLen == 0 || prev.end != cur.start {
			return Range{}, &PartitionError{Index: i, Reason: fmt.Sprintf("%q does not start where ranges[%d] %q ends; only adjacent ranges merge", cur, i-1, prev)}
		}
	}
	last := rs[len(rs)-1]
	return Range{start: rs[0].start, startLen: rs[0].startLen, end: last.end, endLen: last.endLen}, nil
}
