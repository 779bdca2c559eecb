// Package scenario holds the simulator's scenarios: each builds a world of models and
// control-plane machines with their executors, drives a workload through it under faults,
// and checks the histories. TestSim runs the corpus and fresh seeds of every scenario;
// TestMutants shows each invariant tripped by its named mutant; TestCoverage requires every
// declared fault point and rare path to fire over the CI seeds; TestExplore enumerates the
// tiny configurations.
//
// The race detector slows the simulator (one goroutine per run) five to ten times, so under
// -race TestSim runs 20 fresh seeds per scenario and the coverage and exhaustive sweeps
// skip: run the package without -race as well (go test ./detsim/...), as `make test` does.
package scenario

import "loam.dev/router/detsim"

// All lists every scenario.
func All() []detsim.Scenario { return []detsim.Scenario{Traffic, Bank, Push, Cutover} }

// ByName finds a scenario, the known-issue ones included.
func ByName(name string) (detsim.Scenario, bool) {
	for _, sc := range append(All(), CutoverUnguarded) {
		if sc.Name == name {
			return sc, true
		}
	}
	return detsim.Scenario{}, false
}
