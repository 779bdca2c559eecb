package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

func newSimCmd(c *cli) *cobra.Command {
	var a simArgs
	var seeds []uint
	var schedule string
	cmd := &cobra.Command{
		Use:   "sim [scenario...]",
		Short: "Run the deterministic simulator's scenarios over many seeds, with a progress line and ETA",
		Long: `sim runs detsim scenarios: the control-plane machines against simulated routers, shards,
stores and networks, with faults injected by a seeded swarm. One seed decides a whole run,
so a seed replays exactly (same trace hash).

Without scenario arguments every scenario runs (` + strings.Join(scenarioNames(scenario.All()), ", ") + `).
--seeds seeds run per scenario from --from, on --workers cores, with a progress line (seeds/s, failing seeds,
ETA). --seed N (repeatable) replays those seeds instead; with --schedule it replays a shrunk
schedule printed by an earlier failure. --mutant runs a deliberate bug of the system, which
the checkers must catch (the run then fails, as it should).

A failing seed is shrunk (delta debugging over its fault firings and workload operations,
--shrink seeds per scenario) and printed self-contained: the invariant and what broke it,
the seed, every option the seed chose, the shrunk schedule, the history, and the command
that replays it. --report writes an HTML page with an SVG of each shrunk failing run (a lane
per component over simulated time, every request and reply an arrow, faults and the
violation marked), or of the first seed's run when nothing failed.

Exit status: 0 when every seed passed, 3 when a seed failed, 1 when sim could not run.`,
		Example: `  loamrouter sim
  loamrouter sim cutover --seeds 20000 --from 1000000
  loamrouter sim cutover --seed 42 --report run.html
  loamrouter sim --mutant cutover-skip-fence --seeds 200 --report failing.html
  loamrouter sim cutover --seed 17 --mutant cutover-skip-fence --schedule 'ops=3;faults=net.drop#2'
  loamrouter sim push --seeds 500 --output json | jq '.scenarios[].failed_seeds'
  loamrouter sim --list`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if list, _ := cmd.Flags().GetBool("list"); list {
				return c.emit(cmd.OutOrStdout(), scenarioList(), printScenarioList)
			}
			for _, s := range seeds {
				a.seeds = append(a.seeds, uint64(s))
			}
			if cmd.Flags().Changed("schedule") {
				if len(a.seeds) != 1 {
					return errors.New("--schedule replays one run: give exactly one --seed with it")
				}
				sched, err := detsim.ParseSchedule(schedule)
				if err != nil {
					return fmt.Errorf("--schedule: %w", err)
				}
				a.schedule = sched
			}
			if a.trace != "" && len(a.seeds) != 1 {
				return errors.New("--trace writes one run: give exactly one --seed with it")
			}
			if a.count <= 0 && len(a.seeds) == 0 {
				return fmt.Errorf("--seeds %d: give a positive number of seeds", a.count)
			}
			var err error
			a.scenarios, err = chooseScenarios(args, a.mutant)
			if err != nil {
				return err
			}
			if len(a.scenarios) > 1 && a.trace != "" {
				return errors.New("--trace writes one run: name one scenario")
			}
			if a.workers <= 0 {
				a.workers = runtime.GOMAXPROCS(0)
			}
			return c.sim(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), a)
		},
	}
	f := cmd.Flags()
	f.IntVar(&a.count, "seeds", 1000, "seeds per scenario, from --from")
	f.Uint64Var(&a.from, "from", 1, "first seed of the range")
	f.UintSliceVar(&seeds, "seed", nil, "replay this seed (repeatable) instead of a range")
	f.StringVar(&schedule, "schedule", "", "with one --seed: replay this schedule (ops=...;faults=..., from a failure's SHRUNK line)")
	f.StringVar(&a.mutant, "mutant", "", "run this deliberate bug (see --list); without scenario arguments, every scenario that has it")
	f.IntVar(&a.workers, "workers", 0, "runs at once (default: every core)")
	f.IntVar(&a.shrink, "shrink", 3, "failing seeds to shrink, print and picture per scenario (the lowest ones)")
	f.StringVar(&a.report, "report", "", "write an HTML page picturing each shrunk failing run (or the first seed's run) to this file")
	f.StringVar(&a.trace, "trace", "", "with one --seed: write the run's every hashed line (canonical JSON lines) to this file")
	f.Bool("list", false, "list the scenarios and their mutants")
	return cmd
}

// simArgs is what `sim` was asked to do.
type simArgs struct {
	scenarios []detsim.Scenario
	seeds     []uint64 // replays; a range otherwise
	from      uint64
	count     int
	schedule  *detsim.Schedule
	mutant    string
	workers   int
	shrink    int
	report    string
	trace     string
}

// simFailedError is returned when a seed failed; main exits with its code.
type simFailedError struct{ seeds, scenarios int }

func (e *simFailedError) Error() string {
	return fmt.Sprintf("%s in %s (reports above; each replay command replays one exactly)", plural(e.seeds, "failing seed"), plural(e.scenarios, "scenario"))
}

// ExitCode tells a script that the simulator found a failure, not that sim could not run.
func (e *simFailedError) ExitCode() int { return 3 }

func scenarioNames(scs []detsim.Scenario) []string {
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.Name
	}
	return out
}

// chooseScenarios resolves the arguments; with a mutant and no arguments, the scenarios that
// have it.
func chooseScenarios(args []string, mutant string) ([]detsim.Scenario, error) {
	var scs []detsim.Scenario
	for _, name := range args {
		sc, ok := scenario.ByName(name)
		if !ok {
			return nil, fmt.Errorf("no scenario %q: choose from %s", name, strings.Join(scenarioNames(scenario.All()), ", "))
		}
		if mutant != "" && !slices.Contains(sc.Mutants, mutant) {
			return nil, fmt.Errorf("scenario %s has no mutant %q: it has %s (see loamrouter sim --list)", sc.Name, mutant, strings.Join(sc.Mutants, ", "))
		}
		if !slices.ContainsFunc(scs, func(x detsim.Scenario) bool { return x.Name == sc.Name }) {
			scs = append(scs, sc)
		}
	}
	if len(scs) > 0 {
		return scs, nil
	}
	for _, sc := range scenario.All() {
		if mutant == "" || slices.Contains(sc.Mutants, mutant) {
			scs = append(scs, sc)
		}
	}
	if len(scs) == 0 {
		return nil, fmt.Errorf("no scenario has mutant %q (see loamrouter sim --list)", mutant)
	}
	return scs, nil
}

// simScenario is one scenario's outcome, as printed and as JSON.
type simScenario struct {
	Scenario string   `json:"scenario"`
	Mutant   string   `json:"mutant,omitempty"`
	From     uint64   `json:"from,omitempty"` // a range: From .. From+Seeds-1
	Seeds    int      `json:"seeds"`
	Replayed []uint64 `json:"replayed,omitempty"` // --seed runs instead of a range
	Runs     int      `json:"runs"`
	Steps    int      `json:"steps"`
	Seconds  float64  `json:"seconds"`
	// FailedSeeds is every failing seed; Invariants counts them by invariant.
	FailedSeeds []uint64       `json:"failed_seeds"`
	Invariants  map[string]int `json:"invariants,omitempty"`
	// Failures are the shrunk failing seeds (the lowest --shrink of them).
	Failures []simFailure `json:"failures,omitempty"`
	// Results are the replayed runs' hashes (with --seed).
	Results     []simRun `json:"results,omitempty"`
	Interrupted bool     `json:"interrupted,omitempty"`

	passed []detsim.Result // runs to picture when nothing failed, with their histories
}

// simRun is one replayed run.
type simRun struct {
	Seed      uint64  `json:"seed"`
	Schedule  string  `json:"schedule,omitempty"`
	TraceHash string  `json:"trace_hash"`
	Steps     int     `json:"steps"`
	EndMS     int64   `json:"end_ms"`
	Invariant *string `json:"invariant"` // null when the run passed
}

// simFailure is one failing seed, shrunk: everything needed to understand and replay it.
type simFailure struct {
	Seed      uint64         `json:"seed"`
	Mutant    string         `json:"mutant,omitempty"`
	Invariant string         `json:"invariant"`
	Detail    string         `json:"detail"`
	AtMS      int64          `json:"at_ms"`
	Options   detsim.Options `json:"options"`
	TraceHash string         `json:"trace_hash"`
	Replay    string         `json:"replay"`
	GoTest    string         `json:"replay_go_test"`
	Shrunk    *simShrunk     `json:"shrunk,omitempty"`
	// Report is the self-contained text report (seed, options, schedule, history).
	Report string `json:"report"`

	scenario string
	picture  detsim.Result // the run drawn: the shrunk replay, with its history
}

// simShrunk is a failure's shrunk schedule and its replay.
type simShrunk struct {
	Schedule   string `json:"schedule"`
	Faults     int    `json:"faults"`
	Ops        int    `json:"ops"`
	FromFaults int    `json:"from_faults"`
	FromOps    int    `json:"from_ops"`
	Replays    int    `json:"replays"`
	TraceHash  string `json:"trace_hash"`
	Replay     string `json:"replay"`
}

// simOutput is the whole of `sim --output json`.
type simOutput struct {
	Scenarios []simScenario `json:"scenarios"`
	Failed    bool          `json:"failed"`
	Report    string        `json:"report,omitempty"`
}

// sim runs every chosen scenario in turn; out gets the results, progress the progress line.
func (c *cli) sim(ctx context.Context, out, progress io.Writer, a simArgs) error {
	res := simOutput{Report: a.report}
	failedSeeds, failedScenarios := 0, 0
	var runErr error
	for i, sc := range a.scenarios {
		label := sc.Name
		if len(a.scenarios) > 1 {
			label = fmt.Sprintf("[%d/%d] %s", i+1, len(a.scenarios), sc.Name)
		}
		var s simScenario
		var err error
		if len(a.seeds) > 0 {
			s, err = replaySeeds(ctx, sc, a)
		} else {
			s = sweepRange(ctx, progress, label, sc, a)
		}
		if err != nil {
			return err
		}
		if len(s.FailedSeeds) > 0 {
			failedSeeds += len(s.FailedSeeds)
			failedScenarios++
		}
		res.Scenarios = append(res.Scenarios, s)
		if s.Interrupted {
			runErr = fmt.Errorf("interrupted after %d of %d seeds of %s: %w", s.Runs, s.Seeds, sc.Name, ctx.Err())
			break
		}
	}
	res.Failed = failedSeeds > 0
	if a.report != "" {
		n, err := writeSimReport(a.report, res.Scenarios)
		if err != nil {
			return fmt.Errorf("--report %s: %w", a.report, err)
		}
		fmt.Fprintf(progress, "wrote %s (%s pictured)\n", a.report, plural(n, "run"))
	}
	if err := c.emit(out, res, func(w io.Writer) error { printSim(w, res); return nil }); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if res.Failed {
		return &simFailedError{seeds: failedSeeds, scenarios: failedScenarios}
	}
	return nil
}

// sweepRange runs the seed range on every worker with a progress line, then shrinks the
// lowest failing seeds.
func sweepRange(ctx context.Context, progress io.Writer, label string, sc detsim.Scenario, a simArgs) simScenario {
	s := simScenario{Scenario: sc.Name, Mutant: a.mutant, From: a.from, Seeds: a.count}
	start := time.Now()
	var done, failing atomic.Int64
	p := startProgress(progress, func(final bool) string {
		return progressLine(label, int(done.Load()), a.count, int(failing.Load()), time.Since(start))
	})
	r := sc.Sweep(ctx, detsim.SeedRange(a.from, a.count), detsim.SweepOptions{
		Workers: a.workers, Run: detsim.RunOptions{Mutant: a.mutant},
		OnRun: func(r detsim.Result) {
			if r.Violation != nil {
				failing.Add(1)
			}
			done.Add(1)
		},
	})
	p.stop()
	s.Runs, s.Steps, s.Seconds = r.Runs, r.Steps, time.Since(start).Seconds()
	s.FailedSeeds, s.Invariants = r.FailedSeeds, r.Invariants
	s.Interrupted = r.Runs < a.count
	if s.FailedSeeds == nil {
		s.FailedSeeds = []uint64{}
	}
	if len(s.FailedSeeds) == 0 {
		if a.report != "" && a.count > 0 && !s.Interrupted {
			s.passed = []detsim.Result{sc.Run(a.from, detsim.RunOptions{Mutant: a.mutant, History: true})}
		}
		return s
	}
	if s.Interrupted {
		return s
	}
	shrink := s.FailedSeeds[:min(len(s.FailedSeeds), max(a.shrink, 0))]
	if len(shrink) > 0 {
		fmt.Fprintf(progress, "%s: shrinking %d of %d failing seeds (%s)...\n", label, len(shrink), len(s.FailedSeeds), joinSeeds(shrink, 10))
	}
	s.Failures = shrinkAll(sc, a, shrink, nil)
	return s
}

// replaySeeds runs each --seed with its history (and --schedule, --trace), one after the
// other, and shrinks those that fail (a run given a schedule is already shrunk).
func replaySeeds(ctx context.Context, sc detsim.Scenario, a simArgs) (simScenario, error) {
	s := simScenario{Scenario: sc.Name, Mutant: a.mutant, Seeds: len(a.seeds), Replayed: a.seeds, FailedSeeds: []uint64{}, Invariants: map[string]int{}}
	start := time.Now()
	var failed []detsim.Result
	for _, seed := range a.seeds {
		if ctx.Err() != nil {
			s.Interrupted = true
			break
		}
		o := detsim.RunOptions{Mutant: a.mutant, Schedule: a.schedule, History: true}
		var trace *os.File
		if a.trace != "" {
			var err error
			if trace, err = os.Create(a.trace); err != nil {
				return s, fmt.Errorf("--trace: %w", err)
			}
			o.TraceTo = trace
		}
		r := sc.Run(seed, o)
		if trace != nil {
			if err := trace.Close(); err != nil {
				return s, fmt.Errorf("--trace: %w", err)
			}
		}
		s.Runs++
		s.Steps += r.Steps
		run := simRun{Seed: seed, TraceHash: hex.EncodeToString(r.Hash[:]), Steps: r.Steps, EndMS: r.End}
		if a.schedule != nil {
			run.Schedule = a.schedule.String()
		}
		if r.Violation != nil {
			inv := r.Violation.Invariant
			run.Invariant = &inv
			s.FailedSeeds = append(s.FailedSeeds, seed)
			s.Invariants[inv]++
			failed = append(failed, r)
		} else if len(s.passed) < maxPictured {
			s.passed = append(s.passed, r)
		}
		s.Results = append(s.Results, run)
	}
	s.Seconds = time.Since(start).Seconds()
	if a.schedule != nil {
		// The schedule is the shrunk one already: report the runs as they are.
		for _, r := range failed {
			s.Failures = append(s.Failures, failureOf(sc, a, r, nil))
		}
		return s, nil
	}
	seeds := make([]uint64, 0, len(failed))
	for _, r := range failed {
		seeds = append(seeds, r.Seed)
	}
	s.Failures = shrinkAll(sc, a, seeds[:min(len(seeds), max(a.shrink, 0))], failed)
	return s, nil
}

// maxPictured bounds the passing replayed runs a report draws per scenario.
const maxPictured = 10

// shrinkRuns bounds the replays one shrink may take (as the simulator's tests do).
const shrinkRuns = 3000

// shrinkAll shrinks failing seeds on every worker; known holds runs already made.
func shrinkAll(sc detsim.Scenario, a simArgs, seeds []uint64, known []detsim.Result) []simFailure {
	out := make([]simFailure, len(seeds))
	sem := make(chan struct{}, max(a.workers, 1))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var r detsim.Result
			if j := slices.IndexFunc(known, func(k detsim.Result) bool { return k.Seed == seed }); j >= 0 {
				r = known[j]
			} else {
				r = sc.Run(seed, detsim.RunOptions{Mutant: a.mutant})
			}
			sh := sc.Shrink(r, shrinkRuns)
			out[i] = failureOf(sc, a, r, &sh)
		}()
	}
	wg.Wait()
	return out
}

// failureOf describes a failing run and its shrunk replay.
func failureOf(sc detsim.Scenario, a simArgs, r detsim.Result, sh *detsim.Shrunk) simFailure {
	v := r.Violation
	f := simFailure{
		Seed: r.Seed, Mutant: r.Mutant, Invariant: v.Invariant, Detail: v.Detail, AtMS: v.T,
		Options: r.Options, TraceHash: hex.EncodeToString(r.Hash[:]),
		Replay: replayCommand(sc.Name, r.Seed, r.Mutant, r.Schedule),
		GoTest: detsim.ReplayCommand(sc.Name, r.Seed, r.Mutant, r.Schedule),
		Report: detsim.Report(r, sh), scenario: sc.Name, picture: r,
	}
	if sh != nil {
		f.picture = sh.Result
		f.Shrunk = &simShrunk{
			Schedule: sh.Schedule.String(), Faults: len(sh.Schedule.Faults), Ops: len(sh.Schedule.Ops),
			FromFaults: sh.FromFaults, FromOps: sh.FromOps, Replays: sh.Runs,
			TraceHash: hex.EncodeToString(sh.Result.Hash[:]),
			Replay:    replayCommand(sc.Name, r.Seed, r.Mutant, sh.Schedule),
		}
	}
	return f
}

// replayCommand is the command line of this binary that replays a run exactly.
func replayCommand(scenario string, seed uint64, mutant string, sched *detsim.Schedule) string {
	cmd := fmt.Sprintf("loamrouter sim %s --seed %d", scenario, seed)
	if mutant != "" {
		cmd += " --mutant " + mutant
	}
	if sched != nil {
		cmd += " --schedule '" + sched.String() + "'"
	}
	return cmd
}

// printSim prints the outcome for a terminal: a line per scenario, then each shrunk
// failure's report and replay commands.
func printSim(w io.Writer, res simOutput) {
	for _, s := range res.Scenarios {
		name := s.Scenario
		if s.Mutant != "" {
			name += " (mutant " + s.Mutant + ")"
		}
		what := fmt.Sprintf("%d seeds (%d..%d)", s.Runs, s.From, s.From+uint64(max(s.Runs, 1))-1)
		if s.Replayed != nil {
			what = fmt.Sprintf("seed %s", joinSeeds(s.Replayed, 10))
		}
		verdict := "all passed"
		if n := len(s.FailedSeeds); n > 0 {
			var by []string
			for _, inv := range slices.Sorted(maps.Keys(s.Invariants)) {
				by = append(by, fmt.Sprintf("%s %d", inv, s.Invariants[inv]))
			}
			verdict = fmt.Sprintf("%d FAILED (%s)", n, strings.Join(by, ", "))
		}
		fmt.Fprintf(w, "%s: %s, %s, %d steps in %.1fs\n", name, what, verdict, s.Steps, s.Seconds)
		if s.Interrupted {
			fmt.Fprintf(w, "  interrupted: %d of %d seeds ran\n", s.Runs, s.Seeds)
		}
		for _, r := range s.Results {
			verdict := "passed"
			if r.Invariant != nil {
				verdict = "broke " + *r.Invariant
			}
			fmt.Fprintf(w, "  seed %d: %s, %d steps, ends t=%dms, trace hash %s\n", r.Seed, verdict, r.Steps, r.EndMS, r.TraceHash)
		}
		if len(s.FailedSeeds) > len(s.Failures) {
			m := ""
			if s.Mutant != "" {
				m = " --mutant " + s.Mutant
			}
			fmt.Fprintf(w, "  failing seeds: %s\n  replay any of them: loamrouter sim %s --seed N%s\n", joinSeeds(s.FailedSeeds, 20), s.Scenario, m)
		}
		for _, f := range s.Failures {
			fmt.Fprintf(w, "\n--- FAIL %s seed %d: %s ---\n", s.Scenario, f.Seed, f.Invariant)
			fmt.Fprintf(w, "replay with this binary:\n  %s\n", f.Replay)
			if f.Shrunk != nil {
				fmt.Fprintf(w, "  %s   (shrunk)\n", f.Shrunk.Replay)
			}
			fmt.Fprintf(w, "%s\n", f.Report)
		}
	}
}

// joinSeeds lists up to n seeds, then how many more.
func joinSeeds(seeds []uint64, n int) string {
	var b strings.Builder
	for i, s := range seeds {
		if i == n {
			fmt.Fprintf(&b, " (+%d more)", len(seeds)-n)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatUint(s, 10))
	}
	return b.String()
}

// progressLine is "cutover: 412/2000 seeds (20%), 35 seeds/s, 0 failing, ETA 45s".
func progressLine(name string, done, total, failing int, elapsed time.Duration) string {
	rate := float64(done) / max(elapsed.Seconds(), 1e-3)
	eta := "?"
	switch {
	case done >= total:
		eta = "done in " + elapsed.Round(100*time.Millisecond).String()
	case done > 0:
		left := time.Duration(float64(total-done) / rate * float64(time.Second))
		eta = "ETA " + left.Round(time.Second).String()
		if left < time.Second {
			eta = "ETA <1s"
		}
	}
	return fmt.Sprintf("%s: %d/%d seeds (%d%%), %.0f seeds/s, %d failing, %s", name, done, total, 100*done/max(total, 1), rate, failing, eta)
}

// progress redraws a status line: in place several times a second on a terminal, as a new
// line every few seconds otherwise (a log, a CI job); the last state always ends the line.
type progress struct {
	w    io.Writer
	line func(final bool) string
	tty  bool
	quit chan struct{}
	done chan struct{}
}

// progressLogEvery spaces the progress lines written to a file or pipe.
var progressLogEvery = 5 * time.Second

func startProgress(w io.Writer, line func(final bool) string) *progress {
	p := &progress{w: w, line: line, tty: isTerminal(w), quit: make(chan struct{}), done: make(chan struct{})}
	every := progressLogEvery
	if p.tty {
		every = 250 * time.Millisecond
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				if p.tty {
					fmt.Fprintf(p.w, "\r\033[K%s", p.line(false))
				} else {
					fmt.Fprintln(p.w, p.line(false))
				}
			}
		}
	}()
	return p
}

func (p *progress) stop() {
	close(p.quit)
	<-p.done
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, p.line(true))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// scenarioInfo is a line of `sim --list`.
type scenarioInfo struct {
	Name    string   `json:"name"`
	Mutants []string `json:"mutants"`
	Points  int      `json:"fault_points"`
}

func scenarioList() []scenarioInfo {
	var out []scenarioInfo
	for _, sc := range scenario.All() {
		out = append(out, scenarioInfo{Name: sc.Name, Mutants: sc.Mutants, Points: len(sc.Points)})
	}
	return out
}

func printScenarioList(w io.Writer) error {
	for _, s := range scenarioList() {
		fmt.Fprintf(w, "%s: %d fault points\n  mutants: %s\n", s.Name, s.Points, strings.Join(s.Mutants, ", "))
	}
	return nil
}

// writeSimReport draws every shrunk failing run, or each scenario's first run when nothing
// failed, on one page; it returns how many runs it drew.
func writeSimReport(path string, scs []simScenario) (int, error) {
	var sections []reportSection
	failed := false
	for _, s := range scs {
		failed = failed || len(s.Failures) > 0
	}
	for _, s := range scs {
		if failed {
			for _, f := range s.Failures {
				sec, err := failureSection(f)
				if err != nil {
					return 0, err
				}
				sections = append(sections, sec)
			}
			continue
		}
		for _, r := range s.passed {
			tl, err := timelineFromSim(r.History)
			if err != nil {
				return 0, err
			}
			head := fmt.Sprintf("%s seed %d: passed", s.Scenario, r.Seed)
			if r.Mutant != "" {
				head += " (mutant " + r.Mutant + ")"
			}
			text := fmt.Sprintf("SEED     %d\nREPLAY   %s\nHASH     %s (%d steps, ends t=%dms)\nOPTIONS\n%s",
				r.Seed, replayCommand(s.Scenario, r.Seed, r.Mutant, r.Schedule), hex.EncodeToString(r.Hash[:]), r.Steps, r.End, indent(r.Options.String()))
			sections = append(sections, reportSection{Heading: head, Text: text, TL: tl})
		}
	}
	title := "loamrouter sim"
	switch {
	case failed:
		title = fmt.Sprintf("loamrouter sim: %d failing runs, shrunk", len(sections))
	case len(sections) == 1:
		title = "loamrouter sim: " + sections[0].Heading
	}
	return len(sections), writeReportPage(path, title, sections)
}

// failureSection pictures a failure's shrunk run, with the violation marked where the
// checker saw it.
func failureSection(f simFailure) (reportSection, error) {
	r := f.picture
	tl, err := timelineFromSim(r.History)
	if err != nil {
		return reportSection{}, err
	}
	if v := r.Violation; v != nil {
		tl.lane("checker")
		tl.Events = append(tl.Events, tlEvent{At: v.T, From: "checker", To: "checker", Kind: "fault",
			Label: "violated " + v.Invariant + ": " + v.Detail, Detail: v.Error()})
	}
	head := fmt.Sprintf("%s seed %d broke %s", f.scenario, f.Seed, f.Invariant)
	if f.Mutant != "" {
		head += " (mutant " + f.Mutant + ")"
	}
	replay := f.Replay
	if f.Shrunk != nil {
		head += fmt.Sprintf(", shrunk to %d faults and %d ops", f.Shrunk.Faults, f.Shrunk.Ops)
		replay = f.Shrunk.Replay
	}
	text := fmt.Sprintf("DETAIL   %s (t=%dms)\nSEED     %d\nREPLAY   %s\nOPTIONS\n%s", f.Detail, f.AtMS, f.Seed, replay, indent(r.Options.String()))
	return reportSection{Heading: head, Text: text, TL: tl}, nil
}

// plural is "1 seed" or "3 seeds".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
