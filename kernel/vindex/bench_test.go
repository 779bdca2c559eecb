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
// library's DES (through cipher.Block, as Vitess calls it), run in chunks interleaved with the
// measured loop (its timer stopped) so that both see the same machine load.
func BenchmarkHash(b *testing.B) {
	block, err := des.NewCipher(make([]byte, 8))
	if err != nil {
		b.Fatal(err)
	}
	var base time.Duration
	baseN := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkKsid = Hash(uint64(i))
		if i&chunk == chunk {
			b.StopTimer()
			start := time.Now()
			var in, out [8]byte
			for j := i - chunk; j <= i; j++ {
				binary.BigEndian.PutUint64(in[:], uint64(j))
				block.Encrypt(out[:], in[:])
			}
			sinkKsid = out
			base += time.Since(start)
			baseN += chunk + 1
			b.StartTimer()
		}
	}
	if baseN > 0 {
		b.ReportMetric(perOp(b)/(float64(base.Nanoseconds())/float64(baseN)), "x_crypto_des")
	}
}

// chunk+1 operations of a reference run after every chunk+1 measured ones.
const chunk = 1<<10 - 1

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
