package fencemigrate_test

import (
	"fmt"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// The machine refuses to skip a version and names the gate; once the fleet reports A, B is
// allowed.
func ExampleMachine_On() {
	m := fencemigrate.New(fencemigrate.Config{LeaseTTL: 30_000})
	ctx := &machine.Ctx{Now: 0}
	show := func(cmds []fencemigrate.Command) {
		for _, c := range cmds {
			switch c := c.(type) {
			case fencemigrate.Refused:
				fmt.Println("refused:", c.Err())
			case fencemigrate.AllowVersion:
				fmt.Println("allow", c.Version)
			}
		}
	}
	show(m.On(ctx, fencemigrate.Advance{To: fencing.B}))
	show(m.On(ctx, fencemigrate.Advance{To: fencing.A}))
	m.On(ctx, fencemigrate.PodReported{Pod: "relay-0", Version: fencing.A})
	m.On(ctx, fencemigrate.PodReported{Pod: "relay-1", Version: fencing.O})
	show(m.On(ctx, fencemigrate.Advance{To: fencing.B}))
	m.On(ctx, fencemigrate.PodReported{Pod: "relay-1", Version: fencing.A})
	show(m.On(ctx, fencemigrate.Advance{To: fencing.B}))
	// Output:
	// refused: fencemigrate: allow B refused: gate two-adjacent-versions does not hold: O is allowed now; only the next version may follow it
	// allow A
	// refused: fencemigrate: allow B refused: gate every-pod-on-A does not hold: pods not on A: relay-1=O (wait for them to report A)
	// allow B
}
