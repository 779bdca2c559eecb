package detsim

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"slices"
	"time"
)

// Tape is the choice source of exhaustive mode. A run takes its choices from a prefix and
// then always the first option, recording every choice point; the explorer backtracks to
// the last point with an option left, so the runs enumerate the whole schedule tree, and a
// visited set of state hashes cuts every subtree that starts in a state seen before.
type Tape struct {
	prefix []int
	path   []choice
	// FaultBudget bounds how many faults fire in one run.
	FaultBudget int
	faultsUsed  int
	// visit reports whether the state after an event is new (and marks it seen).
	visit func(*Sim) bool
}

type choice struct{ c, n int }

func (t *Tape) choose(n int) int {
	c := 0
	if len(t.path) < len(t.prefix) {
		c = t.prefix[len(t.path)]
		if c >= n {
			// The tree below a replayed prefix is the same as when it was recorded; a
			// mismatch means the run is not deterministic, which must not pass silently.
			panic("detsim: exhaustive replay diverged: a choice point has fewer options than when it was recorded")
		}
	}
	t.path = append(t.path, choice{c, n})
	return c
}

// fault decides an enabled fault point: a branch while the budget lasts, then never.
func (t *Tape) fault() bool {
	if t.faultsUsed >= t.FaultBudget {
		return false
	}
	if t.choose(2) == 1 {
		t.faultsUsed++
		return true
	}
	return false
}

// replaying reports whether the run is still inside its prefix.
func (t *Tape) replaying() bool { return len(t.path) < len(t.prefix) }

// next returns the prefix of the next run in depth-first order, or false when the tree is
// exhausted.
func (t *Tape) next() ([]int, bool) {
	for i := len(t.path) - 1; i >= 0; i-- {
		if t.path[i].c+1 < t.path[i].n {
			p := make([]int, i+1)
			for j := range i {
				p[j] = t.path[j].c
			}
			p[i] = t.path[i].c + 1
			return p, true
		}
	}
	return nil, false
}

// SetStateHasher registers what the explorer adds to the simulator's own state when it
// hashes a state: the world's models, machine snapshots, and whatever of the history
// decides the checkers' verdict. Two schedules that reach the same hash must have the same
// futures; anything left out makes the explorer prune too much.
func (s *Sim) SetStateHasher(f func(h hash.Hash)) { s.stateHasher = f }

// Exploring reports whether the run is in exhaustive mode (scenarios keep their tiny
// configurations' choices few).
func (s *Sim) Exploring() bool { return s.tape != nil }

// RelativeJSON hashes v's JSON encoding with every number under a key named "at" (a
// deadline) made relative to now, so a machine snapshot that waits the same way at a
// different time hashes the same.
func RelativeJSON(h hash.Hash, v any, now int64) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("detsim: state does not encode: " + err.Error())
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		panic("detsim: state does not decode: " + err.Error())
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, v := range t {
				if n, ok := v.(json.Number); ok && k == "at" {
					i, _ := n.Int64()
					t[k] = i - now
					continue
				}
				t[k] = walk(v)
			}
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		}
		return x
	}
	out, _ := json.Marshal(walk(x)) // maps encode with sorted keys
	h.Write(out)
}

// StateHasher returns the registered state hasher (nil if none), so a scenario can extend it.
func (s *Sim) StateHasher() func(h hash.Hash) { return s.stateHasher }

// ExploreResult is what an exhaustive exploration found.
type ExploreResult struct {
	Runs     int           // schedules run (each from the start)
	States   int           // distinct states seen
	Pruned   int           // runs cut because they reached a seen state
	Complete bool          // the tree was exhausted within the run budget
	Elapsed  time.Duration // wall time
	// Violation is the first invariant violation found, with the prefix that reaches it.
	Violation *Violation
	Prefix    []int
}

// Explore enumerates every schedule of a tiny configuration. run builds the world on a Sim
// created with Config.Explore set to the tape it is handed, registers the world's state
// with SetStateHasher, and runs it, returning the first violation. maxRuns bounds the work.
func Explore(faultBudget, maxRuns int, run func(tape *Tape) *Violation) ExploreResult {
	start := time.Now()
	seen := map[[32]byte]bool{}
	var res ExploreResult
	prefix := []int{}
	h := sha256.New()
	for res.Runs < maxRuns {
		t := &Tape{prefix: prefix, FaultBudget: faultBudget}
		t.visit = func(s *Sim) bool {
			if t.replaying() {
				return true
			}
			h.Reset()
			s.hashState(h, t)
			if s.stateHasher != nil {
				s.stateHasher(h)
			}
			var k [32]byte
			h.Sum(k[:0])
			if seen[k] {
				return false
			}
			seen[k] = true
			return true
		}
		res.Runs++
		v := run(t)
		if v != nil && v.Invariant != prunedInvariant {
			res.Violation = v
			res.Prefix = choices(t.path)
			break
		}
		if v != nil {
			res.Pruned++
		}
		next, ok := t.next()
		if !ok {
			res.Complete = true
			break
		}
		prefix = next
	}
	res.States = len(seen)
	res.Elapsed = time.Since(start)
	return res
}

// prunedInvariant marks a run the explorer cut; it is not a violation.
const prunedInvariant = "pruned"

// Pruned returns the pseudo-violation a scenario returns when its Sim was stopped by the
// explorer, so the explorer can tell a cut run from a finished one. A scenario checks its
// safety invariants before returning it: the path that led to the seen state has not been
// checked yet.
func Pruned(s *Sim) *Violation {
	if s.tape != nil && s.stop == "pruned: state already explored" {
		return &Violation{Invariant: prunedInvariant}
	}
	return nil
}

func choices(p []choice) []int {
	out := make([]int, len(p))
	for i, c := range p {
		out[i] = c.c
	}
	return out
}

// hashState adds the simulator's own state: pending events with their due times relative
// to now (absolute time is not state: the same situation an hour later has the same
// future), node liveness, cut and slowed links, and the faults left in the budget.
func (s *Sim) hashState(h hash.Hash, t *Tape) {
	var buf [8]byte
	put := func(v int64) { binary.LittleEndian.PutUint64(buf[:], uint64(v)); h.Write(buf[:]) }
	keys := make([]string, 0, len(s.q))
	for _, e := range s.q {
		b := appendLabel(nil, Label{Kind: e.Kind, From: e.From, To: e.To, What: e.What}, e.at-s.now)
		b = append(b, e.key...)
		keys = append(keys, string(b))
	}
	slices.SortFunc(keys, cmp.Compare[string])
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	for _, nd := range s.Net.nodes {
		if nd.up {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	for i := range s.Net.links {
		for _, l := range s.Net.links[i] {
			if l.down {
				put(-1)
			} else {
				put(l.slow)
			}
		}
	}
	put(int64(t.FaultBudget - t.faultsUsed))
}
