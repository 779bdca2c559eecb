package conformance

import (
	"context"
	"testing"
	"time"

	"loam.dev/router/adapters"
)

// InterleaveCAS runs b's loop with one record compare-and-set on each store per iteration,
// so every store sees the same machine noise, and returns the time each spent. Benchmarks
// report rates and ratios from it, measured in one run.
func InterleaveCAS(b *testing.B, stores ...adapters.ShardMapStore) []time.Duration {
	ctx := context.Background()
	db := adapters.DBRef{Namespace: "bench", Database: "app"}
	vers := make([]uint64, len(stores))
	spent := make([]time.Duration, len(stores))
	rec := SampleRecord("app", 1)
	for b.Loop() {
		for i, s := range stores {
			t0 := time.Now()
			v, err := s.CAS(ctx, db, vers[i], rec)
			spent[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			vers[i] = v
		}
	}
	return spent
}
