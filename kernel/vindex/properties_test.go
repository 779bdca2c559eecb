package vindex

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Unhash undoes Hash, and Hash undoes Unhash: the vindex is a bijection on 64-bit keys.
func TestPropHashRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Uint64().Draw(t, "v")
		require.Equal(t, v, Unhash(Hash(v)))
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], rapid.Uint64().Draw(t, "ksid"))
		require.Equal(t, k, Hash(Unhash(k)))
	})
}

// DES under the zero key is an involution, so reversing is hashing again.
func TestPropHashIsInvolution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Uint64().Draw(t, "v")
		k := Hash(v)
		back := Hash(binary.BigEndian.Uint64(k[:]))
		require.Equal(t, v, binary.BigEndian.Uint64(back[:]))
	})
}

// UnhashBytes agrees with Unhash on 8 bytes and refuses every other length.
func TestPropUnhashBytes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, "ksid")
		got, err := UnhashBytes(b)
		if len(b) != 8 {
			require.ErrorIs(t, err, ErrKeyspaceIDLength)
			require.Contains(t, err.Error(), "bytes long")
			return
		}
		require.NoError(t, err)
		require.Equal(t, Unhash([8]byte(b)), got)
	})
}

// The integer forms of the xxhash vindex hash the decimal text, and the three entry points
// agree on the same bytes.
func TestPropXXHashForms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64().Draw(t, "v")
		require.Equal(t, XXHashString(strconv.FormatInt(v, 10)), XXHashInt64(v))
		if v >= 0 {
			require.Equal(t, XXHashInt64(v), XXHashUint64(uint64(v)))
		}
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "b")
		k := XXHash(b)
		require.Equal(t, k, XXHashString(string(b)))
		require.Equal(t, xxhash.Sum64(b), binary.LittleEndian.Uint64(k[:]))
	})
}

// ParseUint64 accepts exactly blanks, decimal digits, blanks, within 64 bits: the grammar
// checked against strconv on the trimmed text.
func TestPropParseUint64(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOfN(rapid.SampledFrom([]rune("0123456789 \t-+.e")), 0, 24, -1).Draw(t, "s")
		checkParseUint64(t, s)
		n := rapid.Uint64().Draw(t, "n")
		pad := rapid.StringOfN(rapid.SampledFrom([]rune(" \t")), 0, 3, -1)
		got, err := ParseUint64(pad.Draw(t, "pre") + strconv.FormatUint(n, 10) + pad.Draw(t, "post"))
		require.NoError(t, err)
		require.Equal(t, n, got)
	})
}

func checkParseUint64(t require.TestingT, s string) {
	got, err := ParseUint64(s)
	trimmed := strings.Trim(s, " \t")
	want, wantErr := strconv.ParseUint(trimmed, 10, 64)
	digitsOnly := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
	if wantErr != nil || !digitsOnly { // strconv also takes "0x..", "_" and signs never
		require.Error(t, err, "%q", s)
		require.ErrorIs(t, err, ErrNotUint64)
		var pe *ParseError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, s, pe.Text)
		return
	}
	require.NoError(t, err, "%q", s)
	require.Equal(t, want, got, "%q", s)
}

// FuzzParseUint64 holds the parser to the same grammar on arbitrary bytes.
func FuzzParseUint64(f *testing.F) {
	for _, s := range []string{"", "0", " 42\t", "007", "-1", "+1", "1.5", "18446744073709551615",
		"18446744073709551616", "20496382304121724020", "1 2", "\t", "0x10", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseUint64(t, s)
		if k, err := HashText(s); err == nil {
			v, _ := ParseUint64(s)
			require.Equal(t, Hash(v), k)
		}
	})
}

// TestZeroAllocs pins the promise of the doc comments: no hashing entry point allocates.
func TestZeroAllocs(t *testing.T) {
	var k [8]byte
	b := []byte("user@example.com")
	for name, f := range map[string]func(){
		"Hash":         func() { k = Hash(12345) },
		"Unhash":       func() { _ = Unhash(k) },
		"XXHash":       func() { k = XXHash(b) },
		"XXHashString": func() { k = XXHashString("user@example.com") },
		"XXHashInt64":  func() { k = XXHashInt64(-1234567890) },
		"XXHashUint64": func() { k = XXHashUint64(1234567890) },
		"HashText":     func() { k, _ = HashText(" 1234567890 ") },
	} {
		require.Zero(t, testing.AllocsPerRun(100, f), name)
	}
}
