package detsim

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// SweepOptions qualify a sweep.
type SweepOptions struct {
	// Workers is how many runs go at once (default GOMAXPROCS). Each run is single-threaded
	// and owns its Sim, so runs of one sweep share nothing.
	Workers int
	// Run qualifies every run (a mutant, AllFaults). History and TraceTo are for one run
	// and are ignored here: replay the seeds that matter.
	Run RunOptions
	// OnRun, when set, is called with every finished run on the goroutine that ran it;
	// calls are concurrent. It must not keep r.History (there is none) and should be quick.
	OnRun func(r Result)
}

// SweepResult is what a sweep saw.
type SweepResult struct {
	// Runs is how many seeds ran (fewer than asked when ctx ended the sweep early).
	Runs  int
	Steps int
	// Probes sums every run's probes.
	Probes map[string]int
	// FailedSeeds is every seed whose run broke an invariant, in increasing order.
	FailedSeeds []uint64
	// First is the run of the lowest failing seed, or nil. Other failing runs are not kept:
	// a seed replays exactly, so Run it again to look at it.
	First *Result
	// Invariants counts failing runs by the invariant they broke.
	Invariants map[string]int
}

// Sweep runs sc once for each seed, Workers at a time, until every seed ran or ctx ended
// (seeds already started finish; Runs says how many ran). It is the simulator's parallel
// loop for tests and for `loamrouter sim`; what a failure means is theirs to say.
func (sc Scenario) Sweep(ctx context.Context, seeds []uint64, o SweepOptions) SweepResult {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	run := o.Run
	run.History, run.TraceTo = false, nil
	var next atomic.Int64
	var mu sync.Mutex
	res := SweepResult{Probes: map[string]int{}, Invariants: map[string]int{}}
	var wg sync.WaitGroup
	for range min(workers, max(len(seeds), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probes := map[string]int{}
			runs, steps := 0, 0
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(seeds)) {
					break
				}
				r := sc.Run(seeds[i], run)
				runs++
				steps += r.Steps
				for k, v := range r.Probes {
					probes[k] += v
				}
				if r.Violation != nil {
					mu.Lock()
					res.FailedSeeds = append(res.FailedSeeds, r.Seed)
					res.Invariants[r.Violation.Invariant]++
					if res.First == nil || r.Seed < res.First.Seed {
						rr := r
						res.First = &rr
					}
					mu.Unlock()
				}
				if o.OnRun != nil {
					o.OnRun(r)
				}
			}
			mu.Lock()
			res.Runs += runs
			res.Steps += steps
			for k, v := range probes {
				res.Probes[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(res.FailedSeeds)
	return res
}

// SeedRange returns the n seeds base, base+1, ..., base+n-1.
func SeedRange(base uint64, n int) []uint64 {
	out := make([]uint64, max(n, 0))
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}
