package detsim

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// ReplayCommand is the command line that replays a run exactly.
func ReplayCommand(scenario string, seed uint64, mutant string, sched *Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "go test ./detsim/... -run 'TestSim/%s$' -seed=%d", scenario, seed)
	if mutant != "" {
		fmt.Fprintf(&b, " -mutant=%s", mutant)
	}
	if sched != nil {
		fmt.Fprintf(&b, " -schedule='%s'", sched.String())
	}
	return b.String()
}

// historyTail is how many history lines a report prints.
const historyTail = 120

// Report formats a failure as pebble's metamorphic tests and kvnemesis do: self-contained,
// SEED, OPTIONS, the (shrunk) SCHEDULE with its OPS and FAULTS, and the HISTORY of the
// shrunk replay, ending with the line that broke the invariant. Nothing else is needed to
// understand or replay it.
func Report(failed Result, sh *Shrunk) string {
	var b strings.Builder
	v := failed.Violation
	r := failed
	if sh != nil {
		r = sh.Result
		v = sh.Result.Violation
	}
	fmt.Fprintf(&b, "detsim: scenario %s broke invariant %s\n", failed.Scenario, v.Invariant)
	fmt.Fprintf(&b, "DETAIL   %s (t=%dms)\n", v.Detail, v.T)
	fmt.Fprintf(&b, "SEED     %d\n", failed.Seed)
	fmt.Fprintf(&b, "REPLAY   %s\n", ReplayCommand(failed.Scenario, failed.Seed, failed.Mutant, failed.Schedule))
	if sh != nil {
		fmt.Fprintf(&b, "SHRUNK   %s\n", ReplayCommand(failed.Scenario, failed.Seed, failed.Mutant, sh.Schedule))
		fmt.Fprintf(&b, "         (%d faults and %d ops shrunk to %d and %d in %d replays)\n",
			sh.FromFaults, sh.FromOps, len(sh.Schedule.Faults), len(sh.Schedule.Ops), sh.Runs)
	}
	b.WriteString("OPTIONS\n")
	for line := range strings.SplitSeq(strings.TrimRight(r.Options.String(), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	if sh != nil {
		fmt.Fprintf(&b, "SCHEDULE %s\n", sh.Schedule.String())
	}
	b.WriteString("OPS\n")
	kept := 0
	for i, op := range r.Workload {
		if sh != nil && !contains(sh.Schedule.Ops, i) {
			continue
		}
		kept++
		fmt.Fprintf(&b, "  [%d] %s\n", i, op)
	}
	if kept == 0 {
		b.WriteString("  none\n")
	}
	b.WriteString("FAULTS\n")
	if len(r.Firings) == 0 {
		b.WriteString("  none\n")
	}
	for _, f := range r.Firings {
		fmt.Fprintf(&b, "  %s t=%d\n", f, f.T)
	}
	h := r.History
	fmt.Fprintf(&b, "HISTORY (%d steps, ends t=%d, trace hash %s)\n", r.Steps, r.End, hex.EncodeToString(r.Hash[:8]))
	if len(h) > historyTail {
		fmt.Fprintf(&b, "  ... %d earlier lines (replay with -simtrace=<file> for all of them)\n", len(h)-historyTail)
		h = h[len(h)-historyTail:]
	}
	for _, line := range h {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
