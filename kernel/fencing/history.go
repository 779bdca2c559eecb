package fencing

import (
	"cmp"
	"fmt"
	"slices"
)

// Event is one completed call as a client saw it: what was asked, what came back, and when
// the call was sent and answered. A simulator records atomic steps (Invoke == Return, on a
// clock where later steps have larger times); a real client records wall-clock times. Both
// checkers below are sound for either: they only report what must have happened.
type Event struct {
	Pod     string
	Session Session
	Call    Call
	Reply   Reply
	// Invoke and Return are nanoseconds on one clock shared by every pod of the history.
	Invoke, Return int64
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s %s %s v%s ok=%v lease=%s [%d,%d]", e.Pod, e.Session, e.Call.Op, e.Call.Owner, e.Call.Version, e.Reply.OK, e.Reply.Lease, e.Invoke, e.Return)
}

// History is the calls of a run in any order.
type History []Event

func (h History) grants() map[Session][]Event {
	out := map[Session][]Event{}
	for _, e := range h {
		if e.Call.Op == Acquire && e.Reply.OK {
			out[e.Session] = append(out[e.Session], e)
		}
	}
	return out
}

// CheckT1 is single authority on a history. A lease granted by X is certainly live from
// X.Return until the earlier of its release's Invoke and the latest deadline its grant or a
// successful renew guarantees (that call's Invoke + TTL), that deadline excluded. Another
// grant Y of the same session sent at or after X.Return and answered before that end was
// granted while X was live: two owners.
func CheckT1(h History) error {
	type window struct {
		grant      Event
		start, end int64
	}
	const ms = int64(1e6)
	type held struct {
		sess  Session
		lease Lease
	}
	uses := map[held][]Event{}
	for _, e := range h {
		if e.Reply.OK && (e.Call.Op == Renew || e.Call.Op == Release) {
			k := held{e.Session, e.Call.Lease}
			uses[k] = append(uses[k], e)
		}
	}
	wins := map[Session][]window{}
	for sess, gs := range h.grants() {
		for _, g := range gs {
			w := window{grant: g, start: g.Return, end: g.Invoke + g.Call.TTL*ms}
			released := int64(-1)
			for _, e := range uses[held{sess, g.Reply.Lease}] {
				switch e.Call.Op {
				case Renew:
					w.end = max(w.end, e.Invoke+e.Call.TTL*ms)
				case Release:
					if released < 0 || e.Invoke < released {
						released = e.Invoke
					}
				}
			}
			if released >= 0 {
				w.end = min(w.end, released)
			}
			wins[sess] = append(wins[sess], w)
		}
	}
	for sess, ws := range wins {
		for _, x := range ws {
			for _, y := range ws {
				if x.grant.Reply.Lease == y.grant.Reply.Lease {
					continue
				}
				if y.grant.Invoke >= x.start && y.grant.Return < x.end {
					return fmt.Errorf("%w: session %s: %s was granted to %s while %s held %s (live until at least %d)",
						ErrT1, sess, y.grant.Reply.Lease, y.grant.Pod, x.grant.Pod, x.grant.Reply.Lease, x.end)
				}
			}
		}
	}
	return nil
}

// CheckT2 is generation monotonicity on a history: per session, no generation is granted
// twice, and a grant answered before another was sent carries the smaller generation.
func CheckT2(h History) error {
	for sess, gs := range h.grants() {
		byGen := slices.Clone(gs)
		slices.SortFunc(byGen, func(a, b Event) int { return cmp.Compare(a.Reply.Lease.Gen, b.Reply.Lease.Gen) })
		for i := 1; i < len(byGen); i++ {
			if byGen[i].Reply.Lease.Gen == byGen[i-1].Reply.Lease.Gen {
				return fmt.Errorf("%w: session %s: generation %d granted twice (%s by %s, %s by %s)", ErrT2, sess,
					byGen[i].Reply.Lease.Gen, byGen[i-1].Reply.Lease, byGen[i-1].Pod, byGen[i].Reply.Lease, byGen[i].Pod)
			}
		}
		// Real-time order: sort by Return; any later-sent grant must carry a larger generation.
		// Checking each grant against the largest generation answered before it was sent is
		// enough, and is linear after sorting.
		byRet := slices.Clone(gs)
		slices.SortFunc(byRet, func(a, b Event) int { return cmp.Compare(a.Return, b.Return) })
		byInv := slices.Clone(gs)
		slices.SortFunc(byInv, func(a, b Event) int { return cmp.Compare(a.Invoke, b.Invoke) })
		j := 0
		var best *Event
		for i := range byInv {
			y := byInv[i]
			for j < len(byRet) && byRet[j].Return < y.Invoke {
				if best == nil || byRet[j].Reply.Lease.Gen > best.Reply.Lease.Gen {
					best = &byRet[j]
				}
				j++
			}
			if best != nil && best.Reply.Lease.Gen >= y.Reply.Lease.Gen {
				return fmt.Errorf("%w: session %s: %s granted to %s after %s was granted to %s (generations must increase)",
					ErrT2, sess, y.Reply.Lease, y.Pod, best.Reply.Lease, best.Pod)
			}
		}
	}
	return nil
}
