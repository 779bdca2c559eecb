package detsim

// Shrunk is a failing run reduced by delta debugging.
type Shrunk struct {
	// Schedule is the smallest schedule found that still breaks the same invariant.
	Schedule *Schedule
	// Result is the replay of Schedule, with its history kept.
	Result Result
	// Runs is how many replays shrinking took.
	Runs int
	// From is the size of the original schedule: its fault firings and operations.
	FromFaults, FromOps int
}

// Length is the shrunk schedule's length: fault firings plus operations.
func (sh Shrunk) Length() int { return len(sh.Schedule.Faults) + len(sh.Schedule.Ops) }

// Shrink reduces a failing run's schedule by delta debugging (Zeller's ddmin): first over
// its fault firings with every operation kept, then over its operations, then over the
// firings again, until neither list shrinks. A candidate counts as failing only if it
// breaks the same invariant, so shrinking cannot slide to a different bug. maxRuns bounds
// the replays; the best schedule found within it is returned.
func (sc Scenario) Shrink(failed Result, maxRuns int) Shrunk {
	want := failed.Violation.Invariant
	runs := 0
	fails := func(sched *Schedule) bool {
		if runs >= maxRuns {
			return false
		}
		runs++
		r := sc.Run(failed.Seed, RunOptions{Mutant: failed.Mutant, Schedule: sched})
		return r.Violation != nil && r.Violation.Invariant == want
	}
	ops := make([]int, failed.Ops)
	for i := range ops {
		ops[i] = i
	}
	if failed.Schedule != nil && failed.Schedule.Ops != nil {
		ops = append([]int(nil), failed.Schedule.Ops...)
	}
	faults := make([]Firing, len(failed.Firings))
	for i, f := range failed.Firings {
		faults[i] = Firing{Point: f.Point, N: f.N}
	}
	sh := Shrunk{FromFaults: len(faults), FromOps: len(ops)}
	for round := 0; round < 4; round++ {
		nf := ddmin(faults, func(fs []Firing) bool { return fails(&Schedule{Ops: ops, Faults: fs}) })
		no := ddmin(ops, func(os []int) bool { return fails(&Schedule{Ops: os, Faults: nf}) })
		changed := len(nf) < len(faults) || len(no) < len(ops)
		faults, ops = nf, no
		if !changed {
			break
		}
	}
	sh.Schedule = &Schedule{Ops: ops, Faults: faults}
	sh.Runs = runs
	sh.Result = sc.Run(failed.Seed, RunOptions{Mutant: failed.Mutant, Schedule: sh.Schedule, History: true})
	if sh.Result.Violation == nil || sh.Result.Violation.Invariant != want {
		// Only possible when the run budget ran out mid-way: fall back to the full schedule,
		// which replays the original failure exactly.
		sh.Schedule = &Schedule{Ops: ops0(failed), Faults: firings0(failed)}
		sh.Result = sc.Run(failed.Seed, RunOptions{Mutant: failed.Mutant, Schedule: sh.Schedule, History: true})
	}
	return sh
}

func ops0(r Result) []int {
	if r.Schedule != nil && r.Schedule.Ops != nil {
		return r.Schedule.Ops
	}
	out := make([]int, r.Ops)
	for i := range out {
		out[i] = i
	}
	return out
}

func firings0(r Result) []Firing {
	out := make([]Firing, len(r.Firings))
	for i, f := range r.Firings {
		out[i] = Firing{Point: f.Point, N: f.N}
	}
	return out
}

// ddmin returns a subset of items, 1-minimal under fails as far as the budget of fails
// allows: removing any one chunk of the final split no longer fails. It assumes
// fails(items) is true. Order is kept.
func ddmin[T any](items []T, fails func([]T) bool) []T {
	if len(items) == 0 {
		return items
	}
	if fails(items[:0:0]) {
		return items[:0:0]
	}
	n := 2
	for len(items) >= 2 {
		chunks := split(items, n)
		reduced := false
		for _, c := range chunks {
			if fails(c) {
				items, n, reduced = c, 2, true
				break
			}
		}
		// With n == 2 the complements are the chunks themselves, already tried.
		if !reduced && n > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				if fails(comp) {
					items, n, reduced = comp, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(items) {
				break
			}
			n = min(2*n, len(items))
		}
	}
	return items
}

func split[T any](items []T, n int) [][]T {
	out := make([][]T, 0, n)
	size, rem := len(items)/n, len(items)%n
	at := 0
	for i := range n {
		k := size
		if i < rem {
			k++
		}
		out = append(out, items[at:at+k:at+k])
		at += k
	}
	return out
}

func complement[T any](chunks [][]T, skip int) []T {
	var out []T
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}
