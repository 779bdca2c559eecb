package etcdstore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/etcdstore"
	"loam.dev/router/adapters/tikv/tikvtest"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/etcdtest"
)

// BenchmarkCASEtcdVsBoltVsTiKV interleaves one record compare-and-set on each store per
// iteration, so the four rates are measured in the same run on the same machine: etcd on
// one member and on three (every write a raft round through two peers' fsyncs), bbolt
// (one fsynced file) and TiKV's in-process store (no network, no disk). The ratios are the
// figures to quote.
func BenchmarkCASEtcdVsBoltVsTiKV(b *testing.B) {
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "loam.db"), nil)
	require.NoError(b, err)
	defer bolt.Close()
	kv, err := tikvtest.New(nil)
	require.NoError(b, err)
	defer kv.Close()
	open := func(c *etcdtest.Cluster) *etcdstore.Store {
		s, err := etcdstore.Open(etcdstore.Options{Endpoints: c.Endpoints(), Prefix: "bench/", Timeout: 30 * time.Second})
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	e1, e3 := open(etcdtest.Start(b, 1)), open(etcdtest.Start(b, 3))
	names := []string{"etcd1", "etcd3", "bolt", "tikv"}
	spent := conformance.InterleaveCAS(b, e1, e3, bolt, kv)
	n := float64(b.N)
	for i, name := range names {
		b.ReportMetric(n/spent[i].Seconds(), name+"-CAS/s")
	}
	// Rates relative to bbolt's (above 1: faster than bbolt).
	for i, name := range names[:2] {
		b.ReportMetric(spent[2].Seconds()/spent[i].Seconds(), name+"/bolt")
		b.ReportMetric(spent[3].Seconds()/spent[i].Seconds(), name+"/tikv")
	}
}
