package httpstore_test

import (
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/conformance"
)

// BenchmarkCASOverHTTP interleaves a CAS on a bolt file directly and one on another bolt
// file behind a loopback server, and reports both rates and the cost ratio of the network hop.
func BenchmarkCASOverHTTP(b *testing.B) {
	ctx := b.Context()
	direct, err := boltstore.Open(filepath.Join(b.TempDir(), "direct.db"), nil)
	require.NoError(b, err)
	defer direct.Close()
	behind, err := boltstore.Open(filepath.Join(b.TempDir(), "served.db"), nil)
	require.NoError(b, err)
	defer behind.Close()
	opts := withToken(nil)
	srv := httptest.NewServer(httpstore.Handler(behind, opts))
	defer srv.Close()
	c, err := httpstore.Dial(srv.URL, opts)
	require.NoError(b, err)
	defer c.Close()
	db := adapters.DBRef{Namespace: "bench", Database: "app"}
	stores := [2]adapters.ShardMapStore{direct, c}
	var vers [2]uint64
	var spent [2]time.Duration
	rec := conformance.SampleRecord("app", 1)
	b.ReportAllocs()
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
	n := float64(b.N)
	b.ReportMetric(n/spent[0].Seconds(), "bolt-CAS/s")
	b.ReportMetric(n/spent[1].Seconds(), "http-CAS/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "http/bolt")
}
