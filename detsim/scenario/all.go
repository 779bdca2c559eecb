// Package scenario holds the simulator's scenarios: each builds a world of models (and, as
// they land, control-plane machines with their executors), drives a workload through it
// under faults, and checks the histories. TestSim runs the corpus and fresh seeds of every
// scenario; TestMutants shows each invariant tripped by its named mutant.
package scenario

import "loam.dev/router/detsim"

// All lists every scenario.
func All() []detsim.Scenario { return []detsim.Scenario{Traffic, Bank} }

// ByName finds a scenario.
func ByName(name string) (detsim.Scenario, bool) {
	for _, sc := range All() {
		if sc.Name == name {
			return sc, true
		}
	}
	return detsim.Scenario{}, false
}
