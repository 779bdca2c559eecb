package scenario_test

import (
	"testing"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// TestPushKubernetes: the push scenario with the kubelet's projection delay and
// AwaitFiles holds its checks over a sweep of seeds, faults included.
func TestPushKubernetes(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 50
	}
	waited := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		r := scenario.PushKubernetes.Run(seed, detsim.RunOptions{})
		if r.Violation != nil {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violation, r.Options)
		}
		waited += r.Probes["ShardMap.FilesSeen"]
	}
	t.Logf("%d AwaitFiles answers over %d seeds", waited, seeds)
	if waited == 0 {
		t.Fatal("no push waited for the files: the projection delay is not modelled")
	}
}
