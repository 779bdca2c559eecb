package vindex

import (
	"crypto/des"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDESAgainstCryptoDES compares the hand-built null-key DES with the standard library's DES
// on random blocks, both directions.
func TestDESAgainstCryptoDES(t *testing.T) {
	block, err := des.NewCipher(make([]byte, 8))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	var in, enc, dec [8]byte
	for i := range 200_000 {
		v := rng.Uint64()
		if i < 64 {
			v = 1 << i // every single-bit block: each table entry of IP is reached
		}
		binary.BigEndian.PutUint64(in[:], v)
		block.Encrypt(enc[:], in[:])
		block.Decrypt(dec[:], in[:])
		require.Equal(t, binary.BigEndian.Uint64(enc[:]), desNullKey(v), "encrypt %016x", v)
		require.Equal(t, binary.BigEndian.Uint64(dec[:]), desNullKey(v), "decrypt %016x", v)
	}
}

// TestSBoxRowsArePermutations guards the transcription of FIPS 46-3: each row of each S-box
// holds every 4-bit value once.
func TestSBoxRowsArePermutations(t *testing.T) {
	for b, box := range sBoxes {
		for r, row := range box {
			var seen [16]bool
			for _, v := range row {
				require.False(t, seen[v], "S%d row %d repeats %d", b+1, r, v)
				seen[v] = true
			}
		}
	}
}
