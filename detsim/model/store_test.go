package model_test

import (
	"testing"

	"loam.dev/router/conformance"
	"loam.dev/router/detsim/model"
	_ "loam.dev/router/detsim/simtest" // the replay flags
)

// TestStoreContract: the simulator's store model is held to the same contract suite as
// memstore, boltstore and TiKV.
func TestStoreContract(t *testing.T) {
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store {
			s := model.NewStoreSeam(model.NewStore(nil))
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
