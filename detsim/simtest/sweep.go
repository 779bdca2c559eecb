package simtest

import (
	"fmt"
	"os"
	"runtime"
	"sync"
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

// Sweep runs sc for every seed in [base, base+n) on workers goroutines (each run is
// single-threaded and owns its Sim), and returns the aggregate. progress, when set, prints
// a line to stderr every few seconds: seeds done, seeds/s, failures.
func Sweep(sc detsim.Scenario, base uint64, n int, workers int, o detsim.RunOptions, progress bool) Stats {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var done atomic.Int64
	var failures atomic.Int64
	var mu sync.Mutex
	st := Stats{Probes: map[string]int{}}
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
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probes := map[string]int{}
			steps := 0
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					break
				}
				r := sc.Run(base+uint64(i), o)
				steps += r.Steps
				for k, v := range r.Probes {
					probes[k] += v
				}
				if r.Violation != nil {
					failures.Add(1)
					mu.Lock()
					if st.Failed == nil || r.Seed < st.Failed.Seed {
						rr := r
						st.Failed = &rr
					}
					mu.Unlock()
				}
				done.Add(1)
			}
			mu.Lock()
			st.Steps += steps
			for k, v := range probes {
				st.Probes[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	st.Runs = int(done.Load())
	if progress {
		fmt.Fprintf(os.Stderr, "detsim %s: %d seeds in %v (%.0f seeds/s), %d failing\n",
			sc.Name, n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds(), failures.Load())
	}
	return st
}
