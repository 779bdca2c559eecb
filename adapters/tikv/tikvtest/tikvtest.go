// Package tikvtest starts client-go's in-process TiKV (a mock cluster with one store and one
// region, kept in memory) and wraps it in a tikv.Store, for tests of code that uses the TiKV
// store without a real cluster.
package tikvtest

import (
	"fmt"

	"github.com/tikv/client-go/v2/testutils"
	tikvclient "github.com/tikv/client-go/v2/tikv"

	"loam.dev/router/adapters/tikv"
)

// New returns a store on a fresh in-process TiKV. Close it when done.
func New(opts *tikv.Options) (*tikv.Store, error) {
	client, cluster, pd, err := testutils.NewMockTiKV("", nil)
	if err != nil {
		return nil, fmt.Errorf("tikvtest: %w", err)
	}
	testutils.BootstrapWithSingleStore(cluster)
	kv, err := tikvclient.NewTestTiKVStore(client, pd, nil, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("tikvtest: %w", err)
	}
	return tikv.New(kv, opts)
}
