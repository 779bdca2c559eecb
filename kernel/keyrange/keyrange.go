package keyrange

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"
)

// Range is a half-open range [Start, End) of 8-byte keyspace IDs read as big-endian
// integers. An unbounded end means "past the maximum": the range holds 0xffffffffffffffff.
// The zero Range is the whole space, named "-".
type Range struct {
	start    uint64
	end      uint64 // meaningful only when endLen > 0
	startLen uint8  // bytes the start was written with (0: empty, the minimum)
	endLen   uint8  // bytes the end was written with (0: empty, unbounded)
	nonRange bool   // written as a name without '-' ("0"): the whole space
}

// Full returns the whole keyspace, "-".
func Full() Range { return Range{} }

// ParseError says why a shard name is not a key range. Input is the offending text.
type ParseError struct {
	Input  string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("keyrange: shard name %q: %s", e.Input, e.Reason)
}

// Parse reads a Vitess shard name. Like Vitess it accepts upper-case hex and formats
// lower-case. Bounds longer than 8 bytes are refused: the hash and xxhash vindexes make
// 8-byte keyspace IDs, so a longer bound could never separate two of them.
func Parse(name string) (Range, error) {
	bad := func(reason string) (Range, error) { return Range{}, &ParseError{Input: name, Reason: reason} }
	i := strings.IndexByte(name, '-')
	if i < 0 {
		if name == "0" {
			return Range{nonRange: true}, nil
		}
		return bad(`want START-END with even-length hex on each side (e.g. "-80", "40-80", "80-"), or "0" or "-" for the whole keyspace`)
	}
	if strings.IndexByte(name[i+1:], '-') >= 0 {
		return bad(`has more than one "-"; a list of shards is parsed with ParseSpec`)
	}
	start, sl, err := parseBound(name[:i])
	if err != "" {
		return bad("start: " + err)
	}
	end, el, err := parseBound(name[i+1:])
	if err != "" {
		return bad("end: " + err)
	}
	r := Range{start: start, end: end, startLen: sl, endLen: el}
	if el > 0 && start >= end {
		return bad(fmt.Sprintf("start %s is not below end %s (a range must be non-empty)", name[:i], name[i+1:]))
	}
	return r, nil
}

// MustParse is Parse for literals known to be valid; it panics on a bad name.
func MustParse(name string) Range {
	r, err := Parse(name)
	if err != nil {
		panic(err)
	}
	return r
}

func parseBound(s string) (uint64, uint8, string) {
	if len(s)%2 != 0 {
		return 0, 0, fmt.Sprintf("%q has an odd number of hex digits", s)
	}
	if len(s) > 16 {
		return 0, 0, fmt.Sprintf("%q is longer than 8 bytes (keyspace IDs are 8 bytes)", s)
	}
	var b [8]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return 0, 0, fmt.Sprintf("%q is not hex", s)
	}
	return binary.BigEndian.Uint64(b[:]), uint8(len(s) / 2), ""
}

// ParseSpec splits a sharding spec such as "-40-80-c0-" into its ranges
// ("-40", "40-80", "80-c0", "c0-"), as Vitess's ParseShardingSpec does.
func ParseSpec(spec string) ([]Range, error) {
	parts := strings.Split(spec, "-")
	if len(parts) < 2 || parts[0] != "" || parts[len(parts)-1] != "" {
		return nil, &ParseError{Input: spec, Reason: `a sharding spec starts and ends with "-", e.g. "-40-80-c0-"`}
	}
	if len(parts) == 2 {
		return []Range{Full()}, nil
	}
	out := make([]Range, 0, len(parts)-1)
	for i := 0; i+1 < len(parts); i++ {
		r, err := Parse(parts[i] + "-" + parts[i+1])
		if err != nil {
			return nil, &ParseError{Input: spec, Reason: fmt.Sprintf("shard %d: %v", i, err.(*ParseError).Reason)}
		}
		out = append(out, r)
	}
	return out, nil
}

// String formats the range as its Vitess shard name.
func (r Range) String() string {
	if r.nonRange {
		return "0"
	}
	return formatBound(r.start, r.startLen) + "-" + formatBound(r.end, r.endLen)
}

func formatBound(v uint64, n uint8) string {
	if n == 0 {
		return ""
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return hex.EncodeToString(b[:n])
}

// Start returns the lowest keyspace ID in the range, as a big-endian integer.
func (r Range) Start() uint64 { return r.start }

// End returns the first keyspace ID past the range; ok is false when the range runs to the
// end of the space.
func (r Range) End() (end uint64, ok bool) { return r.end, r.endLen > 0 }

// IsFull reports whether the range is the whole keyspace.
func (r Range) IsFull() bool { return r.start == 0 && r.endLen == 0 }

// Equal reports whether two ranges hold the same keyspace IDs, however they were written
// ("80-" equals "8000-"). Use == to compare names as well.
func (r Range) Equal(o Range) bool {
	return r.start == o.start && (r.endLen > 0) == (o.endLen > 0) && (r.endLen == 0 || r.end == o.end)
}

// Contains reports whether the keyspace ID id (big-endian integer) is in the range.
func (r Range) Contains(id uint64) bool {
	return id >= r.start && (r.endLen == 0 || id < r.end)
}

// ContainsKeyspaceID is Contains for the 8-byte form a vindex returns.
func (r Range) ContainsKeyspaceID(ksid [8]byte) bool {
	return r.Contains(binary.BigEndian.Uint64(ksid[:]))
}

// size returns the number of keyspace IDs in the range as a 65-bit value (hi, lo).
func (r Range) size() (hi, lo uint64) {
	if r.endLen == 0 {
		// 2^64 - start
		lo, borrow := bits.Sub64(0, r.start, 0)
		return 1 - borrow, lo
	}
	return 0, r.end - r.start
}
