package vitessdiff

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"vitess.io/vitess/go/sqltypes"
	"vitess.io/vitess/go/vt/vtgate/vindexes"

	"loam.dev/router/kernel/vindex"
)

// inputs is how many random inputs each comparison draws.
const inputs = 100_000

func vitessVindex(t testing.TB, typ string) vindexes.Vindex {
	t.Helper()
	v, err := vindexes.CreateVindex(typ, typ, nil)
	require.NoError(t, err)
	return v
}

// vitessKsid is what Vitess's vindex gives val: its keyspace ID, or ok=false where the value
// has none (the vindex's Map then routes it to no shard).
func vitessKsid(t testing.TB, v vindexes.Vindex, val sqltypes.Value) (ksid []byte, ok bool) {
	t.Helper()
	k, err := v.(vindexes.Hashing).Hash(val)
	if err != nil {
		return nil, false
	}
	require.Len(t, k, 8, "Vitess keyspace id of %v", val)
	return k, true
}

func newRand(t testing.TB, stream uint64) *rand.Rand {
	t.Logf("random inputs from PCG(20260, %d)", stream)
	return rand.New(rand.NewPCG(20260, stream))
}

// randomUint64 favours the edges (small numbers, powers of two and their neighbours, the
// extremes of int64) over a uniform draw, which almost never produces them.
func randomUint64(rng *rand.Rand) uint64 {
	switch rng.IntN(4) {
	case 0:
		return rng.Uint64N(1 << 16)
	case 1:
		return uint64(1)<<rng.IntN(64) + uint64(rng.IntN(3)) - 1
	case 2:
		return []uint64{0, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}[rng.IntN(4)] + uint64(rng.IntN(5)) - 2
	default:
		return rng.Uint64()
	}
}

// TestHashMatchesVitess: the `hash` vindex forward on UINT64 and INT64 values and reverse on
// arbitrary 8-byte keyspace IDs.
func TestHashMatchesVitess(t *testing.T) {
	h := vitessVindex(t, "hash")
	rng := newRand(t, 1)
	for range inputs {
		u := randomUint64(rng)
		want, ok := vitessKsid(t, h, sqltypes.NewUint64(u))
		require.True(t, ok, "UINT64 %d", u)
		got := vindex.Hash(u)
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[:]), "UINT64 %d", u)

		s := int64(u)
		want, ok = vitessKsid(t, h, sqltypes.NewInt64(s))
		require.True(t, ok, "INT64 %d", s)
		got = vindex.Hash(uint64(s))
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[:]), "INT64 %d", s)

		var ksid [8]byte
		binary.BigEndian.PutUint64(ksid[:], rng.Uint64())
		back, err := h.(vindexes.Reversible).ReverseMap(nil, [][]byte{ksid[:]})
		require.NoError(t, err)
		require.Len(t, back, 1)
		wantU, err := back[0].ToUint64()
		require.NoError(t, err)
		require.Equal(t, wantU, vindex.Unhash(ksid), "reverse of %x", ksid)
	}
}

// TestHashReverseRejectsLengthLikeVitess: keyspace IDs that are not 8 bytes fail both ways.
func TestHashReverseRejectsLengthLikeVitess(t *testing.T) {
	h := vitessVindex(t, "hash")
	for _, n := range []int{0, 1, 7, 9, 16} {
		ksid := bytes.Repeat([]byte{0xab}, n)
		_, vErr := h.(vindexes.Reversible).ReverseMap(nil, [][]byte{ksid})
		require.Error(t, vErr, "Vitess, %d bytes", n)
		_, err := vindex.UnhashBytes(ksid)
		require.ErrorIs(t, err, vindex.ErrKeyspaceIDLength, "%d bytes", n)
	}
}

// randomNumericText draws texts near the edge of what the hash vindex parses: digits with
// blanks, signs, points, letters and 20-digit numbers around 2^64.
func randomNumericText(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0: // twenty digits: about half of them past 2^64-1
		var b []byte
		b = append(b, byte('1'+rng.IntN(9)))
		for range 19 {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		return string(b)
	case 1:
		return strconv.FormatUint(randomUint64(rng), 10)
	default:
		const alphabet = "0123456789012345678901234567890123456789 \t-+.xae\n"
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
}

// TestHashTextMatchesVitess: the `hash` vindex on VARCHAR and DECIMAL-like text, including
// the texts Vitess refuses (blank-only, signed, fractional, past 2^64-1).
func TestHashTextMatchesVitess(t *testing.T) {
	h := vitessVindex(t, "hash")
	rng := newRand(t, 2)
	fixed := []string{"", " ", "007", " 42\t", "-1", "+1", "1.5", "0x10", "18446744073709551615",
		"18446744073709551616", "20496382304121724020", "99999999999999999999", "1 2", "\t\t9\t"}
	accepted, overflows := 0, 0
	for i := range inputs + len(fixed) {
		var s string
		if i < len(fixed) {
			s = fixed[i]
		} else {
			s = randomNumericText(rng)
		}
		want, wantOK := vitessKsid(t, h, sqltypes.NewVarChar(s))
		got, err := vindex.HashText(s)
		require.Equal(t, wantOK, err == nil, "VARCHAR %q: Vitess ok=%v, ours err=%v", s, wantOK, err)
		if wantOK {
			accepted++
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[:]), "VARCHAR %q", s)
		} else {
			if _, strictErr := strconv.ParseUint(s, 10, 64); errors.Is(strictErr, strconv.ErrRange) {
				overflows++
			}
			require.ErrorIs(t, err, vindex.ErrNotUint64)
		}
	}
	t.Logf("%d of %d texts had a keyspace id; %d were refused as past 2^64-1", accepted, inputs+len(fixed), overflows)
	require.Greater(t, accepted, inputs/4, "too few accepted texts to compare keyspace ids")
	require.Greater(t, overflows, inputs/20, "too few overflows to compare the refusals")
}

// TestXXHashMatchesVitess: the `xxhash` vindex on VARBINARY, VARCHAR, INT64, UINT64 and NULL.
func TestXXHashMatchesVitess(t *testing.T) {
	x := vitessVindex(t, "xxhash")
	rng := newRand(t, 3)
	check := func(val sqltypes.Value, got [8]byte) {
		want, ok := vitessKsid(t, x, val)
		require.True(t, ok, "%v", val)
		require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[:]), "%v", val)
	}
	check(sqltypes.NULL, vindex.XXHash(nil))
	for range inputs {
		b := make([]byte, rng.IntN(80))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		check(sqltypes.NewVarBinary(string(b)), vindex.XXHash(b))
		check(sqltypes.NewVarChar(string(b)), vindex.XXHashString(string(b)))
		u := randomUint64(rng)
		check(sqltypes.NewUint64(u), vindex.XXHashUint64(u))
		check(sqltypes.NewInt64(int64(u)), vindex.XXHashInt64(int64(u)))
	}
}

var sink [8]byte

// BenchmarkHashVsVitess times vindex.Hash and, interleaved with it in chunks (its timer
// stopped, so both see the same machine load), Vitess's own hash vindex on the same BIGINT
// values (Hashing.Hash on a prepared sqltypes.Value, as vtgate calls it). Metrics:
// vitess_ns/op and x_vitess, the ratio ours/Vitess (goal ≤ 0.5).
func BenchmarkHashVsVitess(b *testing.B) {
	h := vitessVindex(b, "hash").(vindexes.Hashing)
	const chunk = 1<<10 - 1
	keys := make([]int64, chunk+1)
	vals := make([]sqltypes.Value, chunk+1)
	for i := range vals {
		keys[i] = int64(uint64(i) * 0x9E3779B97F4A7C15)
		vals[i] = sqltypes.NewInt64(keys[i])
	}
	var vitess time.Duration
	vitessN := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink = vindex.Hash(uint64(keys[i&chunk]))
		if i&chunk == chunk {
			b.StopTimer()
			start := time.Now()
			for _, v := range vals {
				k, err := h.Hash(v)
				if err != nil {
					b.Fatal(err)
				}
				sink = [8]byte(k)
			}
			vitess += time.Since(start)
			vitessN += len(vals)
			b.StartTimer()
		}
	}
	if vitessN > 0 {
		perVitess := float64(vitess.Nanoseconds()) / float64(vitessN)
		ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(perVitess, "vitess_ns/op")
		b.ReportMetric(ours/perVitess, "x_vitess")
	}
}

// BenchmarkVitessHash is Vitess's hash vindex alone, for its allocs/op.
func BenchmarkVitessHash(b *testing.B) {
	h := vitessVindex(b, "hash").(vindexes.Hashing)
	val := sqltypes.NewInt64(1234567890123)
	b.ReportAllocs()
	for b.Loop() {
		k, _ := h.Hash(val)
		sink = [8]byte(k)
	}
}
