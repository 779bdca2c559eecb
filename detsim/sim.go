package detsim

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/machine"
)

// Config is what a scenario hands New. Everything else about a run is derived from Seed.
type Config struct {
	Scenario string
	Seed     uint64
	// Points are the fault points the scenario's models and executors evaluate; the swarm
	// enables a random subset of them. A point evaluated but not listed never fires.
	Points []string
	// Schedule, when set, overrides the fault firings and workload operations the seed
	// would choose (replaying a shrunk schedule). Nil lists in it mean "as the seed says".
	Schedule *Schedule
	// Explore, when set, runs in exhaustive mode: every choice comes from the tape.
	Explore *Tape
	// TraceTo receives every hashed line (scheduled events and spec events) as JSON lines.
	TraceTo io.Writer
	// History keeps the hashed lines in memory, for a failure report.
	History bool
	// AllFaults enables every listed point instead of a random subset.
	AllFaults bool
	// Force sets each listed point after the swarm drew the others: enabled with its Prob
	// (1 fires at every evaluation), or disabled when Prob is 0. The swarm's draws are the
	// same as without it, so a seed run with a point forced is that seed's run with only
	// the point's firings changed (and what follows from them). Each point must be one of
	// Points. Tests use it to show a point matters: a mutant trips, a probe is reached.
	Force []FaultSetting
}

// Sim is one simulated run: a clock, a queue of events, the one random source that decides
// every choice, the network, the fault points and the trace hash. It is single-threaded:
// models and machines run inside event callbacks, one at a time, and nothing reads the
// wall clock, so a run is a function of its Config.
type Sim struct {
	cfg  Config
	now  int64
	rng  *rand.Rand // the run's ChaCha8 in sample mode; a fixed one for machines' jitter when exploring
	tape *Tape
	keep *Schedule

	q     queue
	free  []*event
	steps int
	stop  string

	opts   Options
	faults []faultState
	healed bool
	// forceAll enables every point the scenario lists (exploring, or Config.AllFaults).
	forceAll bool
	// firings is every fault that fired, in order.
	firings []Firing

	Net *Network

	probes map[string]int

	sha     hash.Hash
	line    []byte
	fields  []machine.Field
	history []string
	onSpec  []func(machine.SpecEvent)

	ops      int
	describe func(int) string

	stateHasher func(hash.Hash)

	afterStep func()
	stepHooks []func()

	nemesis   map[string]func()
	healHooks []func()
}

// New starts a run: it seeds the one ChaCha8 source with cfg.Seed and derives the run's
// options from it (network timings, which fault points are enabled and how often they
// fire), before anything else draws from it.
func New(cfg Config) *Sim {
	s := &Sim{
		cfg:    cfg,
		tape:   cfg.Explore,
		keep:   cfg.Schedule,
		faults: make([]faultState, len(Catalogue)),
		probes: map[string]int{},
		sha:    sha256.New(),
	}
	s.rng = rand.New(rand.NewChaCha8(seedKey(cfg.Seed)))
	s.opts = Options{Scenario: cfg.Scenario, Seed: cfg.Seed}
	if s.tape != nil {
		// Exploring, machines' jitter is not branched on, and a source whose state moved
		// with every draw would make every path's state differ: each draw is the same.
		s.rng = rand.New(constSource{})
		s.forceAll = true
		s.opts.Net = exploreNet()
	} else {
		s.opts.Net = drawNet(s.rng)
	}
	s.forceAll = s.forceAll || cfg.AllFaults
	s.swarm(cfg.Points)
	s.force(cfg.Points, cfg.Force)
	s.opts.Faults = s.Enabled()
	s.Net = newNetwork(s, s.opts.Net)
	return s
}

// constSource is the machines' random source when exploring: every draw is the middle of
// the range.
type constSource struct{}

func (constSource) Uint64() uint64 { return 1 << 63 }

// seedKey spreads a 64-bit seed over ChaCha8's 32-byte key, so seeds 1 and 2 give unrelated
// streams.
func seedKey(seed uint64) [32]byte {
	var k [32]byte
	x := seed
	for i := range 4 {
		// splitmix64: a bijection per word, so distinct seeds give distinct keys.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := range 8 {
			k[i*8+j] = byte(z >> (8 * j))
		}
	}
	return k
}

// Now is the simulated time in milliseconds.
func (s *Sim) Now() int64 { return s.now }

// Seed is the run's seed.
func (s *Sim) Seed() uint64 { return s.cfg.Seed }

// Steps is how many events ran.
func (s *Sim) Steps() int { return s.steps }

// Rand is the source machines get as ctx.Rand: in sample mode the run's one ChaCha8, so
// their jitter is part of the seeded schedule too.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Options returns every option derived from the seed, for the report.
func (s *Sim) Options() Options { return s.opts }

// Param records a scenario option derived from the seed, so the report prints it.
func (s *Sim) Param(name string, v int) int {
	s.opts.Params = append(s.opts.Params, Param{name, v})
	return v
}

// Intn chooses uniformly in [0, n). Exploring, it is a branch of the schedule tree.
func (s *Sim) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	if s.tape != nil {
		return s.tape.choose(n)
	}
	return s.rng.IntN(n)
}

// Between chooses uniformly in [lo, hi]. Exploring, it is always lo: timings are not
// branched on, orders are (see the explorer).
func (s *Sim) Between(lo, hi int64) int64 {
	if hi <= lo || s.tape != nil {
		return lo
	}
	return lo + s.rng.Int64N(hi-lo+1)
}

// Chance is true with probability p. Exploring, it branches when 0 < p < 1.
func (s *Sim) Chance(p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	if s.tape != nil {
		return s.tape.choose(2) == 1
	}
	return s.rng.Float64() < p
}

// chooseFault decides an enabled point's firing. It always consumes one draw, so a replay
// that overrides the decision (Schedule.Faults) keeps the random stream aligned with the
// original run up to the first changed outcome.
func (s *Sim) chooseFault(p float64) bool {
	if s.tape != nil {
		return s.tape.fault()
	}
	return s.rng.Float64() < p
}

// Handle identifies a scheduled event so it can be cancelled.
type Handle struct {
	e   *event
	gen uint64
}

// Pending reports whether the event is still queued.
func (h Handle) Pending() bool { return h.e != nil && h.e.gen == h.gen && h.e.idx >= 0 }

// At schedules fn at time t (now, if t is in the past).
func (s *Sim) At(t int64, l Label, fn func()) Handle {
	if t < s.now {
		t = s.now
	}
	var e *event
	if n := len(s.free); n > 0 {
		e = s.free[n-1]
		s.free = s.free[:n-1]
		e.gen++
		e.at, e.Label, e.fn, e.key = t, l, fn, ""
	} else {
		e = &event{at: t, Label: l, fn: fn}
	}
	if s.tape == nil {
		e.tie = s.rng.Uint64()
	}
	s.q.push(e)
	return Handle{e, e.gen}
}

// release returns a run or cancelled event to the free list.
func (s *Sim) release(e *event) {
	e.fn, e.Label = nil, Label{}
	s.free = append(s.free, e)
}

// After schedules fn d milliseconds from now.
func (s *Sim) After(d int64, l Label, fn func()) Handle { return s.At(s.now+d, l, fn) }

// Cancel removes a pending event; cancelling a fired or cancelled one does nothing.
func (s *Sim) Cancel(h Handle) {
	if h.Pending() {
		s.release(s.q.remove(h.e.idx))
	}
}

// Stop ends the run after the current event, with a reason for the report.
func (s *Sim) Stop(reason string) {
	if s.stop == "" {
		s.stop = reason
	}
}

// Stopped returns the reason given to Stop, or "".
func (s *Sim) Stopped() string { return s.stop }

// Heal closes the fault window: no fault fires any more, and the network's partitions and
// slow links are removed. Scenarios then run a quiet period and check convergence.
func (s *Sim) Heal() {
	s.healed = true
	s.Net.healAll()
}

// Healed reports whether the fault window is closed.
func (s *Sim) Healed() bool { return s.healed }

// Pending is how many events are queued.
func (s *Sim) Pending() int { return len(s.q) }

// Run executes events in order until none is left, the next is after until, maxSteps
// events ran, or Stop was called. It returns the number of events it ran. In sample mode
// the next event is the earliest (ties broken by a random draw made when it was
// scheduled); exploring, the tape chooses among the events due within a few milliseconds of
// the earliest (see ready), and the clock moves to the chosen one's due time if that is
// later.
func (s *Sim) Run(until int64, maxSteps int) int {
	n := 0
	for len(s.q) > 0 && s.stop == "" && n < maxSteps {
		var e *event
		if s.tape != nil {
			c := s.ready()
			i := c[s.tape.choose(len(c))]
			if s.q[i].at > until {
				break
			}
			e = s.q.remove(i)
		} else {
			if s.q[0].at > until {
				break
			}
			e = s.q.remove(0)
		}
		if e.at > s.now {
			s.now = e.at
		}
		s.steps++
		n++
		s.hashLabel(e.Label, s.now)
		fn := e.fn
		s.release(e)
		fn()
		if s.afterStep != nil {
			s.afterStep()
		}
		for _, f := range s.stepHooks {
			f()
		}
		if s.tape != nil && s.tape.visit != nil && !s.tape.visit(s) {
			s.Stop("pruned: state already explored")
		}
	}
	if n < maxSteps && s.stop == "" && s.now < until && until != math.MaxInt64 {
		s.now = until // time passes even when nothing happens
	}
	return n
}

// exploreWindow is how far behind the earliest pending event another event may still be
// chosen to run first when exploring. Messages take no time when exploring, so every
// message in flight is due now and may arrive in any order; a timer due later does not
// interleave with them (it keeps the schedule tree finite and small).
const exploreWindow = 0

// ready returns the queue positions of the events the explorer may run next, in a
// canonical order (due time, then label), so the same state offers the same choices.
func (s *Sim) ready() []int {
	lo := s.q[0].at
	var c []int
	for i, e := range s.q {
		if e.at <= lo+exploreWindow {
			c = append(c, i)
		}
	}
	slices.SortFunc(c, func(a, b int) int {
		x, y := s.q[a], s.q[b]
		if x.at != y.at {
			return cmp.Compare(x.at, y.at)
		}
		return cmp.Compare(labelKey(x), labelKey(y))
	})
	return c
}

func labelKey(e *event) string {
	return e.Kind + "|" + e.From + "|" + e.To + "|" + e.What + "|" + strconv.FormatInt(e.ID, 10) + "|" + e.key
}

// OnStep registers f to run after every event (after the nemesis, when exploring): a
// checker of an invariant about the world's state at every instant (not only about what
// clients saw) runs there. It must not schedule events or draw from the random source.
func (s *Sim) OnStep(f func()) { s.stepHooks = append(s.stepHooks, f) }

// Probe counts one occurrence of a named rare path. Scenarios declare the probes they
// expect and the coverage sweep fails if one never fired.
func (s *Sim) Probe(name string) { s.probes[name]++ }

// Probes returns the counts of every probe that fired.
func (s *Sim) Probes() map[string]int { return s.probes }

// OnSpec registers a checker hook called with every spec event machines emit.
func (s *Sim) OnSpec(f func(machine.SpecEvent)) { s.onSpec = append(s.onSpec, f) }

// Emit makes the Sim a machine.TraceSink: every spec event is hashed, counted as probe
// "Spec.Action", and handed to the checkers.
func (s *Sim) Emit(e machine.SpecEvent) {
	var err error
	s.line, err = appendSpecEvent(s.line[:0], e)
	if err != nil {
		panic(fmt.Sprintf("detsim: a machine emitted an event that cannot be encoded: %v", err))
	}
	s.writeLine(true)
	s.Probe(e.Spec + "." + e.Action)
	for _, f := range s.onSpec {
		f(e)
	}
}

// Ctx returns a machine context at the simulated time, with the run's random source and
// the Sim as its trace sink. offset is added to the clock (a controller whose clock jumped).
func (s *Sim) Ctx(offset int64) *machine.Ctx {
	return &machine.Ctx{Now: s.now + offset, Rand: s.rng, Trace: s}
}

// Note hashes and records a free-form history line from a model or a checker (an
// acknowledged write, a crash), so the report's HISTORY shows it in order.
func (s *Sim) Note(l Label) { s.hashLabel(l, s.now) }

func (s *Sim) hashLabel(l Label, t int64) {
	s.line = appendLabel(s.line[:0], l, t)
	s.writeLine(l.Kind != "nemesis") // a quiet tick is hashed but not worth a history line
}

func (s *Sim) writeLine(keep bool) {
	s.line = append(s.line, '\n')
	s.sha.Write(s.line)
	if s.cfg.TraceTo != nil {
		s.cfg.TraceTo.Write(s.line)
	}
	if s.cfg.History && keep {
		s.history = append(s.history, strings.TrimSuffix(string(s.line), "\n"))
	}
}

// Hash is the SHA-256 of every line hashed so far: each scheduled event as it ran, each
// fault that fired and each spec event, in their canonical JSON encoding.
func (s *Sim) Hash() [32]byte {
	var h [32]byte
	s.sha.Sum(h[:0])
	return h
}

// History returns the hashed lines kept with Config.History.
func (s *Sim) History() []string { return slices.Clone(s.history) }
