package pghash

import "math/bits"

// This file is PostgreSQL's hash_bytes_extended and hash_bytes_uint32_extended
// (src/common/hashfn.c): Bob Jenkins' lookup3 with 32-bit state words, a 64-bit seed and a
// 64-bit result, ported from the algorithm's description. It is not byte-compatible with stock
// lookup3's hashlittle2 (Postgres mixes a final full block in the loop and always runs final,
// even on empty input), so no library can stand in for it.

// golden is lookup3's initial state constant plus Postgres's additive 3923095.
const golden = 0x9e3779b9 + 3923095

func rot(x uint32, k int) uint32 { return bits.RotateLeft32(x, k) }

// mix is lookup3's mix(a, b, c).
func mix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= rot(c, 4)
	c += b
	b -= a
	b ^= rot(a, 6)
	a += c
	c -= b
	c ^= rot(b, 8)
	b += a
	a -= c
	a ^= rot(c, 16)
	c += b
	b -= a
	b ^= rot(a, 19)
	a += c
	c -= b
	c ^= rot(b, 4)
	b += a
	return a, b, c
}

// final is lookup3's final(a, b, c); only b and c are used afterwards.
func final(a, b, c uint32) (uint32, uint32) {
	c ^= b
	c -= rot(b, 14)
	a ^= c
	a -= rot(c, 11)
	b ^= a
	b -= rot(a, 25)
	c ^= b
	c -= rot(b, 16)
	a ^= c
	a -= rot(c, 4)
	b ^= a
	b -= rot(a, 14)
	c ^= b
	c -= rot(b, 24)
	return b, c
}

// start is the state before any data: every word golden plus the length, then, for a
// non-zero seed, its high half added to a, its low half to b, and one mix.
func start(length int, seed uint64) (a, b, c uint32) {
	a = golden + uint32(length)
	b, c = a, a
	if seed != 0 {
		a += uint32(seed >> 32)
		b += uint32(seed)
		a, b, c = mix(a, b, c)
	}
	return a, b, c
}

// le32 reads four bytes little-endian, as Postgres does on the little-endian machines whose
// hashes every deployment in practice sees.
func le32[T string | []byte](k T) uint32 {
	_ = k[3]
	return uint32(k[0]) | uint32(k[1])<<8 | uint32(k[2])<<16 | uint32(k[3])<<24
}

// hashBytes is hash_bytes_extended(k, len(k), seed) over a string or a byte slice without
// converting between them.
func hashBytes[T string | []byte](k T, seed uint64) uint64 {
	a, b, c := start(len(k), seed)
	for len(k) >= 12 { // a last block of exactly 12 bytes is mixed here too
		a += le32(k)
		b += le32(k[4:])
		c += le32(k[8:])
		a, b, c = mix(a, b, c)
		k = k[12:]
	}
	// The tail, zero-padded to 11 bytes; c's low byte takes no data.
	switch len(k) {
	case 11:
		c += uint32(k[10]) << 24
		fallthrough
	case 10:
		c += uint32(k[9]) << 16
		fallthrough
	case 9:
		c += uint32(k[8]) << 8
		fallthrough
	case 8:
		b += le32(k[4:])
		a += le32(k)
	case 7:
		b += uint32(k[6]) << 16
		fallthrough
	case 6:
		b += uint32(k[5]) << 8
		fallthrough
	case 5:
		b += uint32(k[4])
		fallthrough
	case 4:
		a += le32(k)
	case 3:
		a += uint32(k[2]) << 16
		fallthrough
	case 2:
		a += uint32(k[1]) << 8
		fallthrough
	case 1:
		a += uint32(k[0])
	}
	b, c = final(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

// hashUint32 is hash_bytes_uint32_extended(k, seed): hashBytes of k's four little-endian
// bytes, with the block loop and tail reduced to one addition.
func hashUint32(k uint32, seed uint64) uint64 {
	a, b, c := start(4, seed)
	b, c = final(a+k, b, c)
	return uint64(b)<<32 | uint64(c)
}
