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
	// Tiny, when set, builds the scenario's tiny configuration for exhaustive mode on s
	// (whose Config.Explore is set), registers its state with SetStateHasher, runs it and
	// checks it like World.
	Tiny func(s *Sim, mutant string) *Violation
	// TinyPoints are the fault points exhaustive mode enables (every evaluation of each is a
	// branch while the fault budget lasts, so they are few).
	TinyPoints []string
	// TinyMutants are the mutants the tiny configuration must expose. The explorer checks
	// safety invariants on every path; a mutant that only breaks liveness (convergence
	// after the faults heal) is the sampled runs' to find.
	TinyMutants []string
}

// ReplayTiny replays one schedule of the tiny configuration from its choices (an
// ExploreResult's Prefix) and returns the run with its history, for the report.
func (sc Scenario) ReplayTiny(mutant string, faults int, prefix []int) Result {
	// The run goes on to its natural end (the choices after the prefix are all first
	// options, as they were): a violation found where the explorer cut the run is of the
	// past, which only grows.
	t := &Tape{prefix: prefix, FaultBudget: faults}
	s := New(Config{Scenario: sc.Name, Points: sc.TinyPoints, Explore: t, History: true})
	s.SetMutant(mutant)
	v := sc.Tiny(s, mutant)
	return Result{Scenario: sc.Name, Mutant: mutant, Hash: s.Hash(), Steps: s.Steps(), End: s.Now(),
		Violation: v, Firings: s.Firings(), Options: s.Options(), Probes: s.Probes(), History: s.history}
}

// Explore enumerates every schedule of the scenario's tiny configuration with at most
// faults fault firings, up to maxRuns runs.
func (sc Scenario) Explore(mutant string, faults, maxRuns int) ExploreResult {
	return Explore(faults, maxRuns, func(t *Tape) *Violation {
		s := New(Config{Scenario: sc.Name, Points: sc.TinyPoints, Explore: t})
		s.SetMutant(mutant)
		return sc.Tiny(s, mutant)
	})
}

// RunOptions qualify one run of a scenario.
type RunOptions struct {
	Mutant   string
	Schedule *Schedule
	History  bool
	TraceTo  io.Writer
	// AllFaults enables every point the scenario lists instead of a random subset.
	AllFaults bool
	// Force sets listed points as given after the swarm's draw (see Config.Force).
	Force []FaultSetting
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
	// Ops is how many workload operations the seed generated.
	Ops int
	// Workload describes each operation; filled only when the run kept its history.
	Workload []string
	History  []string
}

// Run runs the scenario once with seed.
func (sc Scenario) Run(seed uint64, o RunOptions) Result {
	if o.Mutant != "" && !slices.Contains(sc.Mutants, o.Mutant) {
		panic(fmt.Sprintf("detsim: scenario %s has no mutant %q (it has %v)", sc.Name, o.Mutant, sc.Mutants))
	}
	s := New(Config{Scenario: sc.Name, Seed: seed, Points: sc.Points, Schedule: o.Schedule,
		TraceTo: o.TraceTo, History: o.History, AllFaults: o.AllFaults, Force: o.Force})
	s.SetMutant(o.Mutant)
	v := sc.World(s, o.Mutant)
	return Result{
		Scenario: sc.Name, Seed: seed, Mutant: o.Mutant, Schedule: o.Schedule,
		Hash: s.Hash(), Steps: s.Steps(), End: s.Now(), Violation: v,
		Firings: s.Firings(), Options: s.Options(), Probes: s.Probes(),
		Ops: s.ops, Workload: s.describeOps(), History: s.history,
	}
}

// SetWorkload records how many workload operations the seed generated, so shrinking can
// remove them by index (see KeepOp), and how to describe operation i for a report. The
// descriptions are made only for runs that keep their history.
func (s *Sim) SetWorkload(n int, describe func(i int) string) { s.ops, s.describe = n, describe }

func (s *Sim) describeOps() []string {
	if !s.cfg.History || s.describe == nil {
		return nil
	}
	out := make([]string, s.ops)
	for i := range out {
		out[i] = s.describe(i)
	}
	return out
}

// OpLabel describes operation i for the history.
func OpLabel(i int) string { return "op" + strconv.Itoa(i) }
