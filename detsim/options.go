package detsim

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Options is everything a run derived from its seed, printed in full by a failure report so
// the reader sees the configuration without re-running anything.
type Options struct {
	Scenario string
	Seed     uint64
	Mutant   string
	Net      NetOptions
	Faults   []FaultSetting
	Params   []Param
}

// Param is one scenario option derived from the seed (instance count, operation count...).
type Param struct {
	Name  string
	Value int
}

// NetOptions are the network's timings and the window faults may fire in.
type NetOptions struct {
	// DelayMin and DelayMax bound a message's one-way delay (uniform), ms.
	DelayMin, DelayMax int64
	// TailProb is the probability that a message gets an extra delay of up to TailMax ms
	// (a long tail, which reorders messages on one link).
	TailProb float64
	TailMax  int64
	// CallTimeout is when a caller that got no reply gives up with an indeterminate
	// outcome, ms after sending.
	CallTimeout int64
	// NemesisEvery is the period of the nemesis tick that evaluates nemesis fault points.
	NemesisEvery int64
	// FaultWindow is how long faults may fire, ms from the start; then the run heals.
	FaultWindow int64
}

// drawNet derives the network options from the run's source. Ranges are wide on purpose:
// some seeds have a fast, quiet network and some a slow, lossy one.
func drawNet(r *rand.Rand) NetOptions {
	lo := int64(1 + r.IntN(5))
	return NetOptions{
		DelayMin:     lo,
		DelayMax:     lo + int64(r.IntN(20)),
		TailProb:     []float64{0, 0.01, 0.1}[r.IntN(3)],
		TailMax:      int64(50 + r.IntN(500)),
		CallTimeout:  int64(1000 + 500*r.IntN(5)),
		NemesisEvery: int64(200 + 100*r.IntN(9)),
		FaultWindow:  int64(20_000 + 10_000*r.IntN(5)),
	}
}

// exploreNet is the fixed network of exhaustive mode: messages take no time, so every
// message in flight is ready at once and the explorer branches on their order instead;
// time moves only by timers and timeouts, which keeps states reached by different orders
// equal (and merged by the visited set). The nemesis does not tick: its points are
// evaluated after every step (see StartNemesis).
func exploreNet() NetOptions {
	return NetOptions{DelayMin: 0, DelayMax: 0, CallTimeout: 1000, NemesisEvery: 1000, FaultWindow: 1 << 40}
}

// String prints the options one per line, as the OPTIONS block of a report.
func (o Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario=%s seed=%d mutant=%s\n", o.Scenario, o.Seed, or(o.Mutant, "none"))
	n := o.Net
	fmt.Fprintf(&b, "net: delay=[%d,%d]ms tail=%g up to %dms call_timeout=%dms nemesis_every=%dms fault_window=%dms\n",
		n.DelayMin, n.DelayMax, n.TailProb, n.TailMax, n.CallTimeout, n.NemesisEvery, n.FaultWindow)
	fmt.Fprintf(&b, "faults: %s\n", formatFaults(o.Faults))
	b.WriteString("params:")
	if len(o.Params) == 0 {
		b.WriteString(" none")
	}
	for _, p := range o.Params {
		fmt.Fprintf(&b, " %s=%d", p.Name, p.Value)
	}
	b.WriteByte('\n')
	return b.String()
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// SetMutant records the mutant a scenario runs with, for the report.
func (s *Sim) SetMutant(name string) { s.opts.Mutant = name }
