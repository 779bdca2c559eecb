package etcdstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/etcdstore"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/etcdtest"
)

var prefixes atomic.Int64

// harness opens each case's store under a prefix of its own on one shared cluster, which
// is how deployments share an etcd too.
func harness(c *etcdtest.Cluster) conformance.StoreHarness {
	open := func(t conformance.TB, prefix string) conformance.Store {
		s, err := etcdstore.Open(etcdstore.Options{Endpoints: c.Endpoints(), Prefix: prefix, Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store {
			return open(t, fmt.Sprintf("contract/%d/", prefixes.Add(1)))
		},
		Reopen: func(t conformance.TB, s conformance.Store) conformance.Store {
			prefix := etcdstore.PrefixOf(s.(*etcdstore.Store))
			require.NoError(t, s.(*etcdstore.Store).Close())
			return open(t, prefix)
		},
	}
}

// TestStoreContract runs the store contract on a real single-member cluster and a real
// three-member one (Debian's etcd 3.4 with the v3.6 client).
func TestStoreContract(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			conformance.RunStoreSuite(t, harness(etcdtest.Start(t, n)))
		})
	}
}
