package vindex

import "math/bits"

// This file is the Data Encryption Standard (FIPS 46-3) specialised to the all-zero key,
// written from the tables of the standard.
//
// The zero key is one of DES's four weak keys: PC-1 and PC-2 of an all-zero key select only
// zero bits, so all sixteen round keys are zero and the XOR with the round key vanishes from
// the cipher function. Decryption runs the rounds with the keys in reverse order, which for
// sixteen equal keys is the same as encryption: the cipher is an involution, and desNullKey
// both encrypts and decrypts.
//
// What remains is IP, sixteen Feistel rounds of f(R) = P(S(E(R))), and IP⁻¹. Every table
// below is built once from the standard's tables when the package is initialised; the block
// function then does 16 table lookups for the two permutations and 8 per round.

// initialPermutation is IP from FIPS 46-3: output bit i (1 = most significant) is input bit
// initialPermutation[i-1].
var initialPermutation = [64]uint8{
	58, 50, 42, 34, 26, 18, 10, 2,
	60, 52, 44, 36, 28, 20, 12, 4,
	62, 54, 46, 38, 30, 22, 14, 6,
	64, 56, 48, 40, 32, 24, 16, 8,
	57, 49, 41, 33, 25, 17, 9, 1,
	59, 51, 43, 35, 27, 19, 11, 3,
	61, 53, 45, 37, 29, 21, 13, 5,
	63, 55, 47, 39, 31, 23, 15, 7,
}

// permutationP is P from FIPS 46-3: output bit i of the 32-bit S-box result is bit
// permutationP[i-1] of its input.
var permutationP = [32]uint8{
	16, 7, 20, 21, 29, 12, 28, 17,
	1, 15, 23, 26, 5, 18, 31, 10,
	2, 8, 24, 14, 32, 27, 3, 9,
	19, 13, 30, 6, 22, 11, 4, 25,
}

// sBoxes are S1..S8 from FIPS 46-3, each 4 rows of 16 columns. For a 6-bit input b1..b6 the
// row is b1b6 and the column b2b3b4b5.
var sBoxes = [8][4][16]uint8{
	{
		{14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7},
		{0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8},
		{4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0},
		{15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13},
	},
	{
		{15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10},
		{3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5},
		{0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15},
		{13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9},
	},
	{
		{10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8},
		{13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1},
		{13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7},
		{1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12},
	},
	{
		{7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15},
		{13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9},
		{10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4},
		{3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14},
	},
	{
		{2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9},
		{14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6},
		{4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14},
		{11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3},
	},
	{
		{12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11},
		{10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8},
		{9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6},
		{4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13},
	},
	{
		{4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1},
		{13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6},
		{1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2},
		{6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12},
	},
	{
		{13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7},
		{1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2},
		{7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8},
		{2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11},
	},
}

// Derived tables, filled by init from the ones above.
var (
	// ipBytes[j][v] is IP applied to a block whose only non-zero byte is byte j (0 = most
	// significant) with value v; IP of a block is the OR over its eight bytes.
	ipBytes [8][256]uint64
	// fpBytes is the same for IP⁻¹.
	fpBytes [8][256]uint64
	// spBoxes[i][x] is P applied to the output of S-box i+1 for the 6-bit input x, placed in
	// S-box i+1's nibble; f(R) is the OR over the eight boxes.
	spBoxes [8][64]uint32
	// spPairs[j][x] is the part of f(R) that S-boxes 2j+1 and 2j+2 contribute when the ten
	// bits of E(R) they read together (their groups overlap by two bits) are x.
	spPairs [4][1024]uint32
)

func init() {
	var finalPermutation [64]uint8 // IP⁻¹: if IP moves input bit p to output bit i, IP⁻¹ moves i back to p.
	for i, p := range initialPermutation {
		finalPermutation[p-1] = uint8(i + 1)
	}
	fillPermutationBytes(&ipBytes, &initialPermutation)
	fillPermutationBytes(&fpBytes, &finalPermutation)

	for box := range sBoxes {
		for x := range 64 {
			row := (x>>4)&2 | x&1
			col := (x >> 1) & 0xf
			s := uint32(sBoxes[box][row][col]) << (28 - 4*box) // S-box i+1 fills bits 4i+1..4i+4
			var out uint32
			for i, p := range permutationP {
				if s&(1<<(32-uint(p))) != 0 {
					out |= 1 << (31 - uint(i))
				}
			}
			spBoxes[box][x] = out
		}
	}
	for j := range spPairs {
		for x := range 1024 {
			spPairs[j][x] = spBoxes[2*j][x>>4] | spBoxes[2*j+1][x&0x3f]
		}
	}
}

// fillPermutationBytes builds the byte-indexed lookup tables of a 64-bit permutation given as
// in FIPS 46-3 (output bit i takes input bit perm[i-1], bits numbered from 1 at the most
// significant end).
func fillPermutationBytes(t *[8][256]uint64, perm *[64]uint8) {
	for i, p := range perm {
		in := uint(p - 1) // 0 = most significant input bit
		j, bit := in/8, 7-in%8
		out := uint64(1) << (63 - uint(i))
		for v := range 256 {
			if v&(1<<bit) != 0 {
				t[j][v] |= out
			}
		}
	}
}

// desNullKey encrypts (and, the key being weak, equally decrypts) one 64-bit block, read
// big-endian, with DES under the all-zero key.
//
// The cipher function f(R) with a zero round key is the OR over the eight S-boxes of
// spBoxes[i][E(R) group i]. E cuts R into eight overlapping 6-bit groups, group i (0-based)
// being bits 4i..4i+5 of R counted from 1 at the most significant end, bit 0 meaning bit 32;
// rotating R left by 4i+5 brings exactly that group to the low six bits. The code is written
// out by hand because the compiler does not inline a helper this size into the round loop.
func desNullKey(block uint64) uint64 {
	ip, sp := &ipBytes, &spPairs
	x := ((ip[0][block>>56] | ip[1][block>>48&0xff]) | (ip[2][block>>40&0xff] | ip[3][block>>32&0xff])) |
		((ip[4][block>>24&0xff] | ip[5][block>>16&0xff]) | (ip[6][block>>8&0xff] | ip[7][block&0xff]))
	l, r := uint32(x>>32), uint32(x)
	for range 8 { // sixteen rounds, two per iteration so that l and r need not swap
		l ^= (sp[0][bits.RotateLeft32(r, 9)&0x3ff] | sp[1][bits.RotateLeft32(r, 17)&0x3ff]) |
			(sp[2][bits.RotateLeft32(r, 25)&0x3ff] | sp[3][bits.RotateLeft32(r, 1)&0x3ff])
		r ^= (sp[0][bits.RotateLeft32(l, 9)&0x3ff] | sp[1][bits.RotateLeft32(l, 17)&0x3ff]) |
			(sp[2][bits.RotateLeft32(l, 25)&0x3ff] | sp[3][bits.RotateLeft32(l, 1)&0x3ff])
	}
	// The output of the last round is R16 L16 (the halves are not swapped after round 16).
	y := uint64(r)<<32 | uint64(l)
	fp := &fpBytes
	return ((fp[0][y>>56] | fp[1][y>>48&0xff]) | (fp[2][y>>40&0xff] | fp[3][y>>32&0xff])) |
		((fp[4][y>>24&0xff] | fp[5][y>>16&0xff]) | (fp[6][y>>8&0xff] | fp[7][y&0xff]))
}
