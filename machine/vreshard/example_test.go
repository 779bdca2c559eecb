package vreshard_test

import (
	"fmt"

	"loam.dev/router/machine"
	"loam.dev/router/machine/vreshard"
)

// A reshard of shard 0 into -80 and 80- starts with the pre-flight; once its facts pass,
// the record is made to mirror the serving partition before anything is created.
func Example() {
	m := vreshard.New()
	ctx := &machine.Ctx{Now: 1000}
	for _, c := range m.On(ctx, fixture()) {
		fmt.Println(c)
	}
	for _, c := range m.On(ctx, vreshard.Inspected{Step: "customer/wf/inspect", Attempt: 1, Facts: goodFacts()}) {
		fmt.Println(c)
	}
	// Output:
	// Inspect step=customer/wf/inspect source=0 target=-80,80-
	// ReadServing step=customer/wf/mirror>create cell=zone1
}
