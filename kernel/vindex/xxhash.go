package vindex

import (
	"encoding/binary"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// XXHash is the keyspace ID Vitess's `xxhash` vindex gives a value whose bytes are b: XXH64
// of b with seed 0, written little-endian. b is the value as Vitess holds it: the raw bytes of
// a string or binary value (no collation, case and trailing spaces count), the decimal text of
// a number, and the empty string for NULL. It never allocates.
func XXHash(b []byte) [8]byte {
	var ksid [8]byte
	binary.LittleEndian.PutUint64(ksid[:], xxhash.Sum64(b))
	return ksid
}

// XXHashString is XXHash of the bytes of s, without copying them.
func XXHashString(s string) [8]byte {
	var ksid [8]byte
	binary.LittleEndian.PutUint64(ksid[:], xxhash.Sum64String(s))
	return ksid
}

// XXHashInt64 is the keyspace ID of a signed integer column: the vindex hashes the number's
// decimal text, so -1 hashes the two bytes "-1".
func XXHashInt64(v int64) [8]byte {
	var buf [20]byte
	return XXHash(strconv.AppendInt(buf[:0], v, 10))
}

// XXHashUint64 is the keyspace ID of an unsigned integer column; equal numbers hash alike
// whether signed or unsigned.
func XXHashUint64(v uint64) [8]byte {
	var buf [20]byte
	return XXHash(strconv.AppendUint(buf[:0], v, 10))
}
