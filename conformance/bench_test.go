package conformance_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance"
	"loam.dev/router/kernel/shardmap"
)

// BenchmarkCAS interleaves one CAS on the memory store and one on the bolt store per
// iteration, so both see the same machine noise, and reports each store's rate and the
// bolt/mem time ratio. A bolt CAS includes its fsync.
func BenchmarkCAS(b *testing.B) {
	ctx := context.Background()
	mem := memstore.New()
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "loam.db"), nil)
	require.NoError(b, err)
	defer bolt.Close()
	db := adapters.DBRef{Namespace: "bench", Database: "app"}
	recs := [2]*shardmap.Record{conformance.SampleRecord("app", 1), conformance.SampleRecord("app", 1)}
	var vers [2]uint64
	var spent [2]time.Duration
	stores := [2]adapters.ShardMapStore{mem, bolt}
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range stores {
			t0 := time.Now()
			v, err := s.CAS(ctx, db, vers[i], recs[i])
			spent[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			vers[i] = v
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/spent[0].Seconds(), "mem-CAS/s")
	b.ReportMetric(n/spent[1].Seconds(), "bolt-CAS/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "bolt/mem")
}
