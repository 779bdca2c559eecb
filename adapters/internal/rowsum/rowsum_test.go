package rowsum

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func digest(m Mutant, rows [][]byte) [32]byte {
	s := New(m)
	for _, r := range rows {
		s.Add(r)
	}
	return s.Digest()
}

// The sum ignores row order, counts a repeated row, and tells different row sets apart; each
// mutant breaks the property it is named for.
func TestSum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rows := rapid.SliceOfN(rapid.SliceOf(rapid.Byte()), 1, 20).Draw(t, "rows")
		perm := rapid.Permutation(rows).Draw(t, "perm")
		require.Equal(t, digest(Correct, rows), digest(Correct, perm), "order matters")
		extra := append(append([][]byte{}, rows...), rows[0])
		require.NotEqual(t, digest(Correct, rows), digest(Correct, extra), "a repeated row does not count")
	})
	a, b := []byte("a"), []byte("b")
	require.Equal(t, digest(XOR, [][]byte{a}), digest(XOR, [][]byte{a, b, b}), "XOR should cancel the pair")
	require.NotEqual(t, digest(Ordered, [][]byte{a, b}), digest(Ordered, [][]byte{b, a}), "Ordered should see the order")
	require.Equal(t, [32]byte{}, New(Correct).Digest(), "no rows")
}

// TestMutantOf: the backends' two mutant flags select the variant (ordered over xor).
func TestMutantOf(t *testing.T) {
	require.Equal(t, Correct, MutantOf(false, false))
	require.Equal(t, XOR, MutantOf(false, true))
	require.Equal(t, Ordered, MutantOf(true, false))
	require.Equal(t, Ordered, MutantOf(true, true))
}
