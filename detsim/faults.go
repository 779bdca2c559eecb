package detsim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Point describes one named fault point: where it is injected and what happens when it
// fires. Catalogue is the only list of them; Fault panics on a name it does not hold, so a
// point cannot be injected without being documented here.
type Point struct {
	Name string
	// Nemesis points are evaluated on every nemesis tick (a timer the simulator runs until
	// the fault window closes); the others are evaluated inline, where Where says.
	Nemesis bool
	// Base is the firing probability before swarm scaling (per evaluation).
	Base float64
	// Where names the code that evaluates the point.
	Where string
	// What happens when it fires (§13.3's catalogue entry it implements).
	What string
}

// Catalogue is §13.3's fault catalogue, each entry mapped to where it is injected. The
// coverage test fails if a point never fires over the CI seeds of the scenarios that
// declare it.
var Catalogue = []Point{
	// Network (network.go, nemesis.go).
	{Name: "net.drop", Base: 0.01, Where: "detsim.Network.send (each leg of every call)",
		What: "the message is lost; the caller times out with an indeterminate outcome"},
	{Name: "net.duplicate", Base: 0.01, Where: "detsim.Network.deliver (idempotent requests only)",
		What: "the request is delivered a second time a little later; its reply is ignored"},
	{Name: "net.partition", Nemesis: true, Base: 0.05, Where: "detsim nemesis tick",
		What: "a random pair of nodes is cut, symmetrically or in one direction, and healed after a random time"},
	{Name: "net.slow", Nemesis: true, Base: 0.05, Where: "detsim nemesis tick",
		What: "a random link's delays are multiplied by 10 to 50 for a random time (slow link)"},
	{Name: "net.reset", Nemesis: true, Base: 0.05, Where: "detsim nemesis tick",
		What: "every call in flight on a random link fails at once with an indeterminate outcome; each request may still apply"},

	// Router instances (model/router.go).
	{Name: "pgdog.crash", Nemesis: true, Base: 0.03, Where: "model.Router via nemesis",
		What: "a router instance crashes (sessions, pauses and tasks lost) and restarts after a random time, reading the written files"},
	{Name: "pgdog.reload.after_parse", Base: 0.1, Where: "model.Router.Reload",
		What: "the files parse but applying them fails: the old generation stays loaded and RELOAD answers an error"},
	{Name: "pgdog.cutover.crash", Base: 0.1, Where: "model.Router.Cutover",
		What: "the instance crashes during CUTOVER, before or after the swap (chosen at random); the caller sees a reset"},
	{Name: "pgdog.cutover.fail_after_swap", Base: 0.1, Where: "model.Router.Cutover",
		What: "the CUTOVER task fails after the in-memory swap, which stays applied, and the instance's holds are cleared (PgDog when saving the config fails); the caller sees an error"},
	{Name: "pgdog.cutover.stall", Base: 0.1, Where: "model.Router.Cutover",
		What: "the CUTOVER's drain does not end for 12 s (a destination slow to apply; within PgDog's cutover_timeout): its caller's call times out first, and SHOW TASKS lists it cutting over meanwhile, so the machine lists it again and again and alerts it stuck"},

	// Shard map store (model/store.go).
	{Name: "store.cas.conflict", Base: 0.1, Where: "model.Store.CAS",
		What: "another writer stored a new version (same content) just before this CAS, which conflicts"},

	// Rendered files target (model/files.go).
	{Name: "files.write.fail", Base: 0.1, Where: "model.Files.Write",
		What: "the write is refused (API server error); nothing is written"},

	// Shard backends (model/backend.go).
	{Name: "backend.restart", Nemesis: true, Base: 0.03, Where: "model.Backend via nemesis",
		What: "a backend restarts: every session ends (57P01), in-flight requests are indeterminate, prepared transactions survive"},

	{Name: "backend.fence.fail_slow", Base: 0.2, Where: "scenario cutover's executor, at the cutover's first Fence (cutoverRun.fenceFault)",
		What: "one shard's fence fails for good (every Fence of it answers 42501, nothing applied: the fencing role lacks the privilege there) while a source shard's fence is slow (its server applies each Fence 1.5 retry intervals to 1.5 call timeouts after it arrives, unless the call failed first, Settled: some attempts answer late, some time out and are retried): the fence stage fails, and the rollback must not unfence the slow shard while an attempt of its Fence may still land"},

	// 2PC coordinator (model/coordinator.go).
	{Name: "coord.crash.after_prepare", Base: 0.1, Where: "model.Coordinator, after every PREPARE answered",
		What: "the coordinator's instance crashes between prepare and the decision: the transaction stays prepared until recovery"},
	{Name: "coord.crash.after_decision", Base: 0.1, Where: "model.Coordinator, after the commit decision is logged",
		What: "the coordinator's instance crashes before COMMIT PREPARED reached every shard"},
	{Name: "coord.wal.lost", Base: 0.5, Where: "model.Coordinator restart",
		What: "the coordinator restarts without its log (no persistent volume): its prepared transactions stay in doubt for ever"},

	// Vitess control (model/vtctld.go).
	{Name: "vtctld.reparent.fail", Base: 0.2, Where: "model.Vtctld.TabletExternallyReparented",
		What: "vtctld answers Unavailable without reparenting (its topology server timed out); the caller retries"},

	// Workload (scenario executors).
	{Name: "writes.heavy", Base: 0.2, Where: "scenario cutover's executor, at the cutover's first COPY_DATA (cutoverRun.heavyWrites); scenario vreshard, when the world is built (backing param heavy_writes)",
		What: "heavy writes: cutover, a burst of 100 to 300 client writes (one every 2 ms, through the instances in turn) from the COPY_DATA on, on replication streams of 50 changes/s, so the first catch-up polls show a large lag; vreshard, the streams lag by 10 to 25 s when the copy ends (as heavy_writes=1)"},
	{Name: "pgdog.held", Base: 0.2, Where: "scenario cutover's world when built, opened by its executor at the cutover's first Pause (cutoverRun.holdStatements); cutover-windows' window held is the same every run",
		What: "an instance other than the designated one refuses every PAUSE (53300: admin connections exhausted), so the cutover goes on with it missed, and its links to the source shards hold each statement for up to 3/4 of the call timeout (after the heal too), three clients writing through it until the cutover is done; a machine finalizing on its own does so as soon as every instance resumed: a statement it sent just before its RELOAD is still travelling when finalize opens the source, past a grace shorter than the call timeout"},

	// Pods using the fenced session directory (scenario fencing).
	{Name: "pod.restart", Nemesis: true, Base: 0.05, Where: "scenario fencing via nemesis",
		What: "a pod's process dies and restarts after a random time at the version its deployment runs; the leases it held live until they expire, and requests it had not yet delivered die with its connection"},

	// Streaming replicas read through the causal selector (scenario causal; issue 20).
	{Name: "replica.stall", Nemesis: true, Base: 0.05, Where: "scenario causal via nemesis",
		What: "a replica stops replaying WAL for 1 to 10 s (a long query holding replay, a recovery conflict); it keeps answering polls and reads at its old position"},
	{Name: "replica.lag", Nemesis: true, Base: 0.05, Where: "scenario causal via nemesis",
		What: "a replica falls 1 to 5 s behind the primary for a random time (heavy writes, a slow disk), then catches up"},

	// The controller (the daemon running the machines; scenario executors).
	{Name: "ctl.restart", Nemesis: true, Base: 0.02, Where: "detsim.Runner via nemesis",
		What: "the controller restarts: each machine is restored from its last snapshot and fed Restarted; replies in flight are lost"},
	{Name: "ctl.reply.late", Base: 0.1, Where: "scenarios cutover and cutover-windows (window late), every failed answer the cutover's executor feeds back (lateReplies)",
		What: "the answer reaches the machine a second time, 10 ms to 2 s later (a transport that delivers twice, a timed-out call's answer turning up) while a retry of its step may be in flight"},
	{Name: "clock.jump", Nemesis: true, Base: 0.02, Where: "detsim.Runner via nemesis",
		What: "the controller's wall clock jumps forward by up to 5 minutes (machines see it in ctx.Now; timers already set keep their time, as Go's monotonic timers do, until a restart sets them again on the jumped clock)"},
}

var catalogueIndex = func() map[string]int {
	m := make(map[string]int, len(Catalogue))
	for i, p := range Catalogue {
		if _, dup := m[p.Name]; dup {
			panic("detsim: fault point " + p.Name + " catalogued twice")
		}
		m[p.Name] = i
	}
	return m
}()

// LookupPoint returns the catalogue entry of name.
func LookupPoint(name string) (Point, bool) {
	i, ok := catalogueIndex[name]
	if !ok {
		return Point{}, false
	}
	return Catalogue[i], true
}

// FaultSetting is one enabled point of a run and its firing probability.
type FaultSetting struct {
	Point string
	Prob  float64
}

// Firing is one fault that fired: the N-th evaluation (from 1) of Point. (Point, N) is
// what a schedule lists, so a run can be replayed with exactly those firings.
type Firing struct {
	Point string
	N     int
	T     int64 // when it fired, for the report
}

func (f Firing) String() string { return f.Point + "#" + strconv.Itoa(f.N) }

// faultState is a run's bookkeeping for one point.
type faultState struct {
	enabled bool
	prob    float64
	evals   int
	fired   int
}

// Fault reports whether the named fault point fires now. Models call it where the
// catalogue says; it panics on a name the catalogue does not hold. After the fault window
// closes (the run is healing), nothing fires.
func Fault(s *Sim, point string) bool { return s.Fault(point) }

// Fault is the method form of the package-level Fault.
func (s *Sim) Fault(point string) bool {
	i, ok := catalogueIndex[point]
	if !ok {
		panic(fmt.Sprintf("detsim: fault point %q is not in the catalogue (detsim/faults.go)", point))
	}
	st := &s.faults[i]
	st.evals++
	if !st.enabled || s.healed {
		return false
	}
	fire := s.chooseFault(st.prob)
	if s.keep != nil && s.keep.Faults != nil {
		fire = s.keep.hasFault(point, st.evals)
	}
	if !fire {
		return false
	}
	st.fired++
	f := Firing{Point: point, N: st.evals, T: s.now}
	s.firings = append(s.firings, f)
	s.Probe("fault:" + point)
	s.hashLabel(Label{Kind: "fault", What: point, ID: int64(st.evals)}, s.now)
	return true
}

// FaultEnabled reports whether a point can fire in this run.
func (s *Sim) FaultEnabled(point string) bool {
	i, ok := catalogueIndex[point]
	return ok && s.faults[i].enabled
}

// Enabled lists the run's enabled fault points with their probabilities, by name.
func (s *Sim) Enabled() []FaultSetting {
	var out []FaultSetting
	for i, st := range s.faults {
		if st.enabled {
			out = append(out, FaultSetting{Catalogue[i].Name, st.prob})
		}
	}
	return out
}

// Firings returns the faults that fired so far, in order.
func (s *Sim) Firings() []Firing { return slices.Clone(s.firings) }

// swarm enables a random subset of points (each with probability 1/2) and gives each a
// probability of Base scaled by 1/4, 1 or 4: different runs stress different mixes, which
// finds more than one run that enables everything a little (swarm testing).
func (s *Sim) swarm(points []string) {
	for _, name := range points {
		i, ok := catalogueIndex[name]
		if !ok {
			panic(fmt.Sprintf("detsim: scenario declares fault point %q, which is not in the catalogue", name))
		}
		on := s.rng.IntN(2) == 0
		scale := []float64{0.25, 1, 4}[s.rng.IntN(3)]
		if s.forceAll {
			on = true
		}
		if on {
			p := min(Catalogue[i].Base*scale, 0.9)
			s.faults[i] = faultState{enabled: true, prob: p}
		}
	}
}

// force applies Config.Force.
func (s *Sim) force(points []string, fs []FaultSetting) {
	for _, f := range fs {
		i, ok := catalogueIndex[f.Point]
		if !ok || !slices.Contains(points, f.Point) {
			panic(fmt.Sprintf("detsim: forced fault point %q is not one the scenario lists", f.Point))
		}
		s.faults[i] = faultState{}
		if f.Prob > 0 {
			s.faults[i] = faultState{enabled: true, prob: min(f.Prob, 1)}
		}
	}
}

func formatFaults(fs []FaultSetting) string {
	if len(fs) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", f.Point, strconv.FormatFloat(f.Prob, 'g', 4, 64))
	}
	return b.String()
}
