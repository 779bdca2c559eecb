package simtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"loam.dev/router/detsim"
)

// shrinkRuns bounds the replays one shrink may take.
const shrinkRuns = 3000

// Fail shrinks a failing run and fails t with the self-contained report.
func Fail(t testing.TB, sc detsim.Scenario, r detsim.Result) {
	t.Helper()
	sh := sc.Shrink(r, shrinkRuns)
	t.Fatalf("\n%s", detsim.Report(r, &sh))
}

// Stats is what a sweep saw.
type Stats struct {
	Runs   int
	Steps  int
	Probes map[string]int
	// Failed is the first failing result (lowest seed among those that failed), or nil.
	Failed *detsim.Result
}

// Sweep runs sc for every seed in [base, base+n) on workers goroutines (Scenario.Sweep),
// and returns the aggregate. progress, when set, prints a line to stderr every few seconds:
// seeds done, seeds/s, failures.
func Sweep(sc detsim.Scenario, base uint64, n int, workers int, o detsim.RunOptions, progress bool) Stats {
	var done, failures atomic.Int64
	stop := make(chan struct{})
	start := time.Now()
	if progress {
		go func() {
			tk := time.NewTicker(5 * time.Second)
			defer tk.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tk.C:
					d := done.Load()
					fmt.Fprintf(os.Stderr, "detsim %s: %d/%d seeds, %.0f seeds/s, %d failing\n",
						sc.Name, d, n, float64(d)/time.Since(start).Seconds(), failures.Load())
				}
			}
		}()
	}
	res := sc.Sweep(context.Background(), detsim.SeedRange(base, n), detsim.SweepOptions{
		Workers: workers, Run: o,
		OnRun: func(r detsim.Result) {
			if r.Violation != nil {
				failures.Add(1)
			}
			done.Add(1)
		},
	})
	close(stop)
	if progress {
		fmt.Fprintf(os.Stderr, "detsim %s: %d seeds in %v (%.0f seeds/s), %d failing\n",
			sc.Name, n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds(), failures.Load())
	}
	return Stats{Runs: res.Runs, Steps: res.Steps, Probes: res.Probes, Failed: res.First}
}
