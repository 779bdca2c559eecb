package detsim_test

import (
	"fmt"
	"math"

	"loam.dev/router/detsim"
)

// A run is a function of its seed: two nodes, one call, the same trace hash every time.
func Example() {
	run := func(seed uint64) [32]byte {
		s := detsim.New(detsim.Config{Scenario: "example", Seed: seed})
		a, b := s.Net.AddNode("a"), s.Net.AddNode("b")
		s.Net.Call(a, b, "ping", detsim.Idempotent,
			func(reply detsim.Reply) { reply("pong", nil) },
			func(v any, err error) { s.Note(detsim.Label{Kind: "answer", What: fmt.Sprint(v, err)}) })
		s.Run(math.MaxInt64, 100)
		return s.Hash()
	}
	fmt.Println(run(7) == run(7), run(7) == run(8))
	// Output: true false
}

// A schedule's text form is what a failure report prints and -schedule reads back.
func ExampleParseSchedule() {
	sc, err := detsim.ParseSchedule("ops=0,3;faults=pgdog.crash#2")
	fmt.Println(sc.Ops, sc.Faults, err)
	// Output: [0 3] [pgdog.crash#2] <nil>
}
