package memstore_test

import (
	"testing"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance"
)

func TestStoreContract(t *testing.T) {
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store {
			s := memstore.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	})
}
