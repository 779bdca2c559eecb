package refrouter_test

import (
	"testing"
	"time"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

// BenchmarkShard: the cost of choosing a shard through shardmap.Locate (text key, the
// route PgDog's rules take) against the bare hash kernel, as a ratio measured in the same
// run, interleaved in chunks so that load on a shared machine hits both alike.
func BenchmarkShard(b *testing.B) {
	top, err := refrouter.ParseFiles(renderPgDog(b, shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, backends(8)...)))
	if err != nil {
		b.Fatal(err)
	}
	db := top.Databases["app"]
	b.ReportAllocs()
	var routed, direct time.Duration
	var sink int
	const chunk = 1024
	for i := 0; i < b.N; i += chunk {
		n := min(chunk, b.N-i)
		t0 := time.Now()
		for k := range n {
			s, err := db.Shard(int64(i + k))
			if err != nil {
				b.Fatal(err)
			}
			sink += s
		}
		t1 := time.Now()
		for k := range n {
			sink += int(pghash.ShardOfInt8(int64(i+k), 8))
		}
		routed, direct = routed+t1.Sub(t0), direct+time.Since(t1)
	}
	if sink < 0 {
		b.Fatal("unreachable")
	}
	b.ReportMetric(float64(routed)/float64(direct), "x-pghash")
}
