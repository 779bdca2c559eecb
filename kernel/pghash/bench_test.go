package pghash

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

var sink uint64

// benchShards is the shard count of the int8 benchmarks: not a power of two, so the modulo is
// a real division.
const benchShards = 12

// BenchmarkShardOfInt8 is the bigint shard-of-key; x_xxhash_8B is its time over
// xxhash.Sum64 of the same key's 8 bytes, the speed-of-light reference (goal ≤ 1.5). The
// reference runs in chunks interleaved with the measured loop (its timer stopped), so that
// both see the same machine load.
func BenchmarkShardOfInt8(b *testing.B) {
	var base time.Duration
	baseN := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink += ShardOfInt8(int64(uint64(i)*0x9E3779B97F4A7C15), benchShards)
		if i&chunk == chunk {
			b.StopTimer()
			start := time.Now()
			var buf [8]byte
			for j := i - chunk; j <= i; j++ {
				binary.LittleEndian.PutUint64(buf[:], uint64(j)*0x9E3779B97F4A7C15)
				sink += xxhash.Sum64(buf[:])
			}
			base += time.Since(start)
			baseN += chunk + 1
			b.StartTimer()
		}
	}
	if baseN > 0 {
		perBase := float64(base.Nanoseconds()) / float64(baseN)
		ours := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(perBase, "xxhash_ns/op")
		b.ReportMetric(ours/perBase, "x_xxhash_8B")
	}
}

// chunk+1 operations of the reference run after every chunk+1 measured ones.
const chunk = 1<<12 - 1

func BenchmarkHashInt8Extended(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink += HashInt8Extended(int64(i), uint64(i))
	}
}

func BenchmarkShardOfText(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sink += ShardOfText("user-1234567@example.com", benchShards)
	}
}

func BenchmarkShardOfUUID(b *testing.B) {
	b.ReportAllocs()
	u := [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	for i := 0; b.Loop(); i++ {
		u[15] = byte(i)
		sink += ShardOfUUID(u, benchShards)
	}
}

func BenchmarkRowTwoColumns(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var r Row
		r.Int8(int64(i))
		r.Text("eu-west")
		sink += r.Remainder(benchShards)
	}
}

func BenchmarkParseUUID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		u, _ := ParseUUID("123e4567-e89b-12d3-a456-426614174000")
		sink += uint64(u[0])
	}
}
