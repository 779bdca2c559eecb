package fencing_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
)

// The exhaustive explorer: a breadth-first walk of every state of one session, three pods and
// the rollout O → A → B → backfill → C → enable, in the shape of the seed's TLA+ model. Time is
// abstract, as there: a lease lives until an Expire step removes it (expiry and release look
// the same to the other pods), renewals change nothing a checker sees, and generations stop at
// MaxGen so the walk ends. The rollout gates are written here the way the seed states them;
// loam.dev/router/machine/fencemigrate enforces the same gates on real reports.

const maxGen = 4

type world struct {
	snap       fencing.Snapshot
	pods       [3]fencing.Version
	allowed    fencing.Version
	backfilled bool
	enabled    bool
	lastIssued uint64
}

func (w world) clone() world { w.snap = w.snap.Clone(); return w }

func (w world) key() string {
	var b strings.Builder
	for _, k := range w.snap.Keys() {
		fmt.Fprintf(&b, "%s=%s;", k, w.snap[k].Value)
	}
	fmt.Fprintf(&b, "%v|%v|%v|%v|%d", w.pods, w.allowed, w.backfilled, w.enabled, w.lastIssued)
	return b.String()
}

func (w world) all(v fencing.Version) bool {
	for _, p := range w.pods {
		if p != v {
			return false
		}
	}
	return true
}

type step struct {
	name string
	next world
	err  error // the invariant this step broke, if any
}

const farFuture = 1 << 40

// successors lists every step enabled in w under mutant m.
func successors(w world, m fencing.Mutant) []step {
	var out []step
	for i, v := range w.pods {
		n := w.clone()
		r, err := fencing.Apply(n.snap, keys, 0, fencing.Call{Version: v, Op: fencing.Acquire, Owner: fmt.Sprintf("p%d", i+1), TTL: farFuture}, m)
		if err != nil {
			panic(err)
		}
		if !r.OK || r.Lease.Gen > maxGen {
			continue
		}
		s := step{name: fmt.Sprintf("p%d(%s) acquires %s", i+1, v, r.Lease), next: n}
		if r.Lease.Gen <= n.lastIssued {
			s.err = fmt.Errorf("%w: %s issued after %d", fencing.ErrT2, r.Lease, n.lastIssued)
		}
		n.lastIssued = max(n.lastIssued, r.Lease.Gen)
		s.next = n
		if s.err == nil {
			s.err = fencing.CheckSingleAuthority(n.snap, fencing.Buzz, []fencing.Session{sess}, 0)
		}
		out = append(out, s)
	}
	for _, sp := range []fencing.Keyspace{fencing.Old, fencing.New} {
		if _, ok := w.snap[keys.Lease(sp)]; ok {
			n := w.clone()
			delete(n.snap, keys.Lease(sp))
			out = append(out, step{name: "expire " + sp.String(), next: n})
		}
	}
	for i, v := range w.pods {
		if v < w.allowed {
			n := w.clone()
			n.pods[i]++
			out = append(out, step{name: fmt.Sprintf("p%d upgrades to %s", i+1, n.pods[i]), next: n})
		}
	}
	if !w.enabled && w.allowed < fencing.C {
		next := w.allowed + 1
		_, oldLive := w.snap[keys.OldLease]
		ok := w.all(w.allowed)
		if next == fencing.C && m != fencing.M4 {
			ok = ok && w.backfilled && !oldLive
		}
		if ok {
			n := w.clone()
			n.allowed = next
			out = append(out, step{name: "allow " + next.String(), next: n})
		}
	}
	if w.all(fencing.B) && !w.backfilled {
		n := w.clone()
		if _, err := fencing.Apply(n.snap, keys, 0, fencing.Call{Op: fencing.Backfill}, m); err != nil {
			panic(err)
		}
		n.backfilled = true
		out = append(out, step{name: "backfill", next: n})
	}
	if w.all(fencing.C) && !w.enabled {
		n := w.clone()
		n.enabled = true
		out = append(out, step{name: "enable", next: n, err: fencing.CheckDrained(n.snap, fencing.Buzz, []fencing.Session{sess}, 0)})
	}
	return out
}

type exploration struct {
	distinct   int
	violations map[error][]string // invariant -> shortest trace that broke it
}

func explore(m fencing.Mutant) exploration {
	init := world{snap: fencing.Snapshot{}}
	type node struct {
		w     world
		trace []string
	}
	seen := map[string]bool{init.key(): true}
	queue := []node{{w: init}}
	res := exploration{violations: map[error][]string{}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		res.distinct++
		for _, s := range successors(cur.w, m) {
			trace := append(append([]string(nil), cur.trace...), s.name)
			if s.err != nil {
				for _, inv := range []error{fencing.ErrT1, fencing.ErrT2, fencing.ErrT3} {
					if errors.Is(s.err, inv) && res.violations[inv] == nil {
						res.violations[inv] = append(trace, s.err.Error())
					}
				}
				continue // a broken state is not explored further
			}
			if k := s.next.key(); !seen[k] {
				seen[k] = true
				queue = append(queue, node{w: s.next, trace: trace})
			}
		}
	}
	return res
}

// TestExhaustiveProtocol: every reachable state of 3 pods with generations up to 4 keeps T1,
// T2 and T3. The seed's TLC run of its TLA+ model (Pods = {p1,p2,p3}, MaxGen = 4) found 1,487
// distinct states; this walk finds the same number, which is evidence (not proof) that it
// explores the same state space with the same actions.
func TestExhaustiveProtocol(t *testing.T) {
	res := explore(fencing.NoMutant)
	for inv, trace := range res.violations {
		t.Errorf("%v:\n  %s", inv, strings.Join(trace, "\n  "))
	}
	t.Logf("distinct states: %d (seed's TLC model: 1487)", res.distinct)
	require.Equal(t, 1487, res.distinct)
}

// TestExhaustiveMutants: each mutant of the seed's table trips the invariant the table names.
func TestExhaustiveMutants(t *testing.T) {
	want := map[fencing.Mutant]error{
		fencing.M1: fencing.ErrT1, fencing.M2: fencing.ErrT1, fencing.M3: fencing.ErrT2,
		fencing.M4: fencing.ErrT1, fencing.M5: fencing.ErrT2,
	}
	for m, inv := range want {
		t.Run(m.String(), func(t *testing.T) {
			res := explore(m)
			trace, ok := res.violations[inv]
			require.True(t, ok, "%s must trip %v; it tripped %v", m, inv, res.violations)
			t.Logf("%s trips %v after %d steps:\n  %s", m, inv, len(trace)-1, strings.Join(trace, "\n  "))
		})
	}
	// M4 also opens the door early: with T1 steps pruned the walk still reaches an enable
	// with a live old lease or an unfolded counter.
	require.Contains(t, explore(fencing.M4).violations, fencing.ErrT3)
}
