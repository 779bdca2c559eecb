package vindex

import (
	"crypto/des"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

var (
	sinkKsid [8]byte
	sinkU64  uint64
)

// BenchmarkHash measures the `hash` vindex; x_crypto_des is its time over the standard
// library's DES (through cipher.Block, as Vitess calls it) measured in the same run.
func BenchmarkHash(b *testing.B) {
	block, err := des.NewCipher(make([]byte, 8))
	if err != nil {
		b.Fatal(err)
	}
	const baseN = 1 << 20
	start := time.Now()
	var in, out [8]byte
	for i := range baseN {
		binary.BigEndian.PutUint64(in[:], uint64(i))
		block.Encrypt(out[:], in[:])
	}
	sinkKsid = out
	base := float64(time.Since(start).Nanoseconds()) / baseN
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkKsid = Hash(uint64(i))
	}
	b.ReportMetric(perOp(b)/base, "x_crypto_des")
}

func BenchmarkUnhash(b *testing.B) {
	b.ReportAllocs()
	k := Hash(42)
	for b.Loop() {
		sinkU64 = Unhash(k)
	}
}

// BenchmarkXXHashInt64 measures the `xxhash` vindex on an integer column, which formats the
// number as text first; x_sum64_8B is its time over xxhash.Sum64 of 8 raw bytes.
func BenchmarkXXHashInt64(b *testing.B) {
	const baseN = 1 << 22
	start := time.Now()
	var buf [8]byte
	for i := range baseN {
		binary.LittleEndian.PutUint64(buf[:], uint64(i))
		sinkU64 = xxhash.Sum64(buf[:])
	}
	base := float64(time.Since(start).Nanoseconds()) / baseN
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkKsid = XXHashInt64(int64(i) * 7919)
	}
	b.ReportMetric(perOp(b)/base, "x_sum64_8B")
}

func BenchmarkParseUint64(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkU64, _ = ParseUint64("18446744073709551615")
	}
}

// perOp is the current benchmark's ns/op, read after its loop.
func perOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
