package detsim

import (
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Violation is an invariant a run broke. Invariant is a stable name (the checkers' and the
// mutants' tables use it); Detail says what was observed, with the ids to find it in the
// history.
type Violation struct {
	Invariant string
	Detail    string
	T         int64
}

func (v *Violation) Error() string {
	return fmt.Sprintf("invariant %s violated at t=%d: %s", v.Invariant, v.T, v.Detail)
}

// Scenario is one simulated situation: the models, the machines and their executors, the
// workload and the checkers, built on a fresh Sim by Run.
type Scenario struct {
	Name string
	// Points are the fault points the scenario's world evaluates (the swarm draws from them).
	Points []string
	// Probes are the rare paths and fault points a sweep of the CI seeds must see at least
	// once each.
	Probes []string
	// Mutants are the mutant names Run accepts ("" is the correct system).
	Mutants []string
	// World builds the world on s, runs it to its end and returns the first violation, or
	// nil.
	World func(s *Sim, mutant string) *Violation
}

// RunOptions qualify one run of a scenario.
type RunOptions struct {
	Mutant   string
	Schedule *Schedule
	History  bool
	TraceTo  io.Writer
	// AllFaults enables every point the scenario lists instead of a random subset.
	AllFaults bool
}

// Result is what one run produced.
type Result struct {
	Scenario  string
	Seed      uint64
	Mutant    string
	Schedule  *Schedule
	Hash      [32]byte
	Steps     int
	End       int64
	Violation *Violation
	Firings   []Firing
	Options   Options
	Probes    map[string]int
	Workload  []string
	History   []string
}

// Run runs the scenario once with seed.
func (sc Scenario) Run(seed uint64, o RunOptions) Result {
	if o.Mutant != "" && !slices.Contains(sc.Mutants, o.Mutant) {
		panic(fmt.Sprintf("detsim: scenario %s has no mutant %q (it has %v)", sc.Name, o.Mutant, sc.Mutants))
	}
	s := New(Config{Scenario: sc.Name, Seed: seed, Points: sc.Points, Schedule: o.Schedule,
		TraceTo: o.TraceTo, History: o.History, AllFaults: o.AllFaults})
	s.SetMutant(o.Mutant)
	v := sc.World(s, o.Mutant)
	return Result{
		Scenario: sc.Name, Seed: seed, Mutant: o.Mutant, Schedule: o.Schedule,
		Hash: s.Hash(), Steps: s.Steps(), End: s.Now(), Violation: v,
		Firings: s.Firings(), Options: s.Options(), Probes: s.Probes(),
		Workload: s.workload, History: s.history,
	}
}

// SetWorkload records the workload the seed generated, one description per operation, so
// the report can list it and shrinking can remove operations by index (see KeepOp).
func (s *Sim) SetWorkload(ops []string) { s.workload = ops }

// OpLabel describes operation i for the history.
func OpLabel(i int) string { return "op" + strconv.Itoa(i) }
