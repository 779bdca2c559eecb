package pghash

import "strings"

// The extended hash functions of the types a partition or shard key can have: support function
// 2 of each type's default hash operator class. Each returns the bits of the int8 Postgres
// returns (SQL prints them signed: int64(h) is what psql shows).

// HashInt8Extended is hashint8extended(v, seed). It folds the high word into the low one
// (complemented for negative values), so that every int8 inside the int32 range hashes like
// the same int4, then hashes the 32-bit result. The fold is not injective: 4294967296 hashes
// like 1.
func HashInt8Extended(v int64, seed uint64) uint64 {
	return hashUint32(foldInt8(v), seed)
}

// foldInt8 is hashint8extended's fold: lo ^ hi for v ≥ 0, lo ^ ^hi for v < 0, written
// without a branch (v>>63 is all ones exactly when v is negative).
func foldInt8(v int64) uint32 {
	return uint32(v) ^ uint32(v>>32) ^ uint32(v>>63)
}

// HashInt4Extended is hashint4extended(v, seed).
func HashInt4Extended(v int32, seed uint64) uint64 {
	return hashUint32(uint32(v), seed)
}

// HashInt2Extended is hashint2extended(v, seed): v sign-extended to 32 bits.
func HashInt2Extended(v int16, seed uint64) uint64 {
	return hashUint32(uint32(int32(v)), seed)
}

// HashBytesExtended is hash_bytes_extended(b, len(b), seed), the hash of bytea
// (hashvarlenaextended) and the byte-level core of the text and uuid hashes.
func HashBytesExtended(b []byte, seed uint64) uint64 {
	return hashBytes(b, seed)
}

// HashTextExtended is hashtextextended(s, seed) for text and varchar under a deterministic
// collation ("C", "POSIX", libc locales, deterministic ICU ones, and every database default in
// Postgres 15): the hash of the value's bytes in the database encoding, which must be UTF8
// for a Go string to be those bytes. A nondeterministic ICU collation hashes the ICU sort key
// instead, which cannot be reproduced here; such keys cannot be routed by this package.
func HashTextExtended(s string, seed uint64) uint64 {
	return hashBytes(s, seed)
}

// HashBpcharExtended is hashbpcharextended(s, seed) for char(n): trailing spaces do not
// count, so 'abc  '::char(5) hashes like 'abc'.
func HashBpcharExtended(s string, seed uint64) uint64 {
	return hashBytes(strings.TrimRight(s, " "), seed)
}

// HashUUIDExtended is uuid_hash_extended(u, seed): the hash of the 16 bytes in the order
// the textual form writes them.
func HashUUIDExtended(u [16]byte, seed uint64) uint64 {
	return hashBytes(u[:], seed)
}
