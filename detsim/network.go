package detsim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"loam.dev/router/adapters"
)

// NodeID names a node of the simulated network: a router instance, a backend, the store,
// the controller, a client.
type NodeID int32

// ErrIndeterminate is wrapped by every network failure whose outcome the caller cannot know:
// a timeout (the request or its reply was lost) or a reset (the connection broke while the
// call was in flight). The request may have applied. Checkers treat such an operation as
// "may have applied", never as failed and never as an error of the system under test.
var ErrIndeterminate = errors.New("detsim: outcome unknown, the request may have applied")

// IndeterminateError is a timeout or a reset. It matches ErrIndeterminate and
// adapters.ErrUnreachable.
type IndeterminateError struct {
	From, To string
	What     string
	Cause    string // "timeout" or "reset"
}

func (e *IndeterminateError) Error() string {
	return fmt.Sprintf("detsim: %s %s→%s: %s (the request may have applied)", e.What, e.From, e.To, e.Cause)
}

// Is matches ErrIndeterminate and adapters.ErrUnreachable.
func (e *IndeterminateError) Is(target error) bool {
	return target == ErrIndeterminate || target == adapters.ErrUnreachable
}

// RefusedError says the peer was down when the call was made: the request did not apply.
// It matches adapters.ErrUnreachable.
type RefusedError struct{ From, To, What string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("detsim: %s %s→%s: connection refused (the peer is down; nothing applied)", e.What, e.From, e.To)
}

// Is matches adapters.ErrUnreachable.
func (e *RefusedError) Is(target error) bool { return target == adapters.ErrUnreachable }

// CallFlags qualify a call.
type CallFlags uint8

const (
	// Idempotent calls may be delivered twice (net.duplicate): reads, observes, reloads,
	// watches (a client library retrying them on a new connection). Writes, holds and
	// one-shot admin commands (PAUSE, RESUME, CUTOVER) are never duplicated, as a TCP
	// connection never duplicates a request.
	Idempotent CallFlags = 1 << iota
	// LongPoll calls (a store Watch) wait up to 30 times CallTimeout for their answer.
	LongPoll
	// Settled calls never apply after their caller has seen them fail: a request not yet
	// delivered when the call times out or its connection resets is dropped. This is the
	// ShardBackend contract for Fence and Unfence (adapters/postgres and adapters/mysql
	// cut a call short only once its server session is gone), without which a fence that
	// timed out could land after the unfence that followed it. Settled calls are never
	// duplicated either. When the caller crashes, a Settled request not yet delivered is
	// either lost or applied at once: the controller that takes over first waits out the
	// lease (driver.Lease, a TTL of seconds), and by then a dead process's connection has
	// delivered or lost its last bytes.
	Settled
)

// Reply is how a handler answers a call, at once or later. Only the first answer counts.
type Reply func(v any, err error)

type node struct {
	name string
	up   bool
	inc  uint64 // incarnation: bumped by every crash, so a dead process's replies are dropped
}

type link struct {
	down bool  // messages on this directed link are lost
	slow int64 // delay multiplier, 1 when normal
}

type call struct {
	id         uint64
	from, to   NodeID
	what       string
	fromInc    uint64
	toInc      uint64
	done       func(any, error)
	timeout    Handle
	delivered  bool
	completed  bool
	suppressed bool // reset decided the request never arrives
	settled    bool // Settled: dropped if undelivered when the call fails
	handle     func(Reply)
}

// Network is the simulated network: a queue per directed link (events in the Sim's queue),
// a delay distribution, drops, duplicates, partitions, slow links and resets.
type Network struct {
	s        *Sim
	o        NetOptions
	nodes    []node
	links    [][]link
	inflight map[uint64]*call
	nextCall uint64
}

func newNetwork(s *Sim, o NetOptions) *Network {
	return &Network{s: s, o: o, inflight: map[uint64]*call{}}
}

// AddNode adds a node, up, and returns its id.
func (n *Network) AddNode(name string) NodeID {
	id := NodeID(len(n.nodes))
	n.nodes = append(n.nodes, node{name: name, up: true, inc: 1})
	for i := range n.links {
		n.links[i] = append(n.links[i], link{slow: 1})
	}
	row := make([]link, len(n.nodes))
	for i := range row {
		row[i].slow = 1
	}
	n.links = append(n.links, row)
	return id
}

// Name returns a node's name.
func (n *Network) Name(id NodeID) string { return n.nodes[id].name }

// Nodes is how many nodes there are.
func (n *Network) Nodes() int { return len(n.nodes) }

// Up reports whether a node is running.
func (n *Network) Up(id NodeID) bool { return n.nodes[id].up }

// Incarnation counts a node's crashes (from 1); a callback can compare it to tell whether
// the process that scheduled it is still the one running.
func (n *Network) Incarnation(id NodeID) uint64 { return n.nodes[id].inc }

// Crash stops a node: calls it made are forgotten (their callbacks never run), calls to it
// fail at once with a reset, and requests still travelling to it are lost.
func (n *Network) Crash(id NodeID) {
	nd := &n.nodes[id]
	if !nd.up {
		return
	}
	nd.up = false
	nd.inc++
	n.s.Note(Label{Kind: "crash", To: nd.name})
	for _, c := range n.inflightSorted() {
		switch {
		case c.from == id && c.settled && !c.delivered:
			n.forget(c)
			if n.s.Chance(0.5) {
				n.deliver(c, 0, c.handle, false)
			}
			c.suppressed = true
		case c.from == id:
			n.forget(c)
		case c.to == id:
			n.complete(c, nil, &IndeterminateError{From: n.nodes[c.from].name, To: nd.name, What: c.what, Cause: "reset"})
		}
	}
}

// Restart brings a crashed node back (a new incarnation; the model restores its own
// durable state).
func (n *Network) Restart(id NodeID) {
	if n.nodes[id].up {
		return
	}
	n.nodes[id].up = true
	n.s.Note(Label{Kind: "restart", To: n.nodes[id].name})
}

func (n *Network) inflightSorted() []*call {
	out := make([]*call, 0, len(n.inflight))
	for _, c := range n.inflight {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *call) int { return cmp.Compare(a.id, b.id) })
	return out
}

// delay draws one message's delay on from→to.
func (n *Network) delay(from, to NodeID) int64 {
	d := n.s.Between(n.o.DelayMin, n.o.DelayMax)
	if n.s.Chance(n.o.TailProb) {
		d += n.s.Between(0, n.o.TailMax)
	}
	return d * n.links[from][to].slow
}

// lost decides whether a message on from→to is lost: the link is cut, or net.drop fires.
func (n *Network) lost(from, to NodeID) bool {
	if n.links[from][to].down {
		return true
	}
	return n.s.Fault("net.drop")
}

// Call sends a request named what from one node to another. handle runs at the destination
// when the request arrives and answers through its Reply, at once or later; done runs at
// the caller with the answer, exactly once, unless the caller crashed first. A lost
// message or reply makes done see an *IndeterminateError after CallTimeout; a destination
// that is down makes it see a *RefusedError.
func (n *Network) Call(from, to NodeID, what string, flags CallFlags, handle func(Reply), done func(any, error)) {
	n.nextCall++
	c := &call{id: n.nextCall, from: from, to: to, what: what, done: done,
		fromInc: n.nodes[from].inc, toInc: n.nodes[to].inc, settled: flags&Settled != 0, handle: handle}
	n.inflight[c.id] = c
	fromName, toName := n.nodes[from].name, n.nodes[to].name
	if !n.nodes[to].up {
		// Refused: no connection, so no request bytes exist that a crash of the caller
		// could still deliver (Crash's Settled coin flip) once the destination is back.
		c.suppressed = true
		n.s.After(2*n.delay(from, to), Label{Kind: "refused", From: fromName, To: toName, What: what, ID: int64(c.id)}, func() {
			n.complete(c, nil, &RefusedError{From: fromName, To: toName, What: what})
		})
		return
	}
	timeout := n.o.CallTimeout
	if flags&LongPoll != 0 {
		timeout *= 30
	}
	c.timeout = n.s.After(timeout, Label{Kind: "timeout", From: fromName, To: toName, What: what, ID: int64(c.id)}, func() {
		if c.settled && !c.delivered {
			c.suppressed = true
		}
		n.complete(c, nil, &IndeterminateError{From: fromName, To: toName, What: what, Cause: "timeout"})
	})
	if n.lost(from, to) {
		return
	}
	n.deliverAfter(c, n.delay(from, to), flags, handle, false)
}

func (n *Network) deliverAfter(c *call, d int64, flags CallFlags, handle func(Reply), dup bool) {
	kind := "deliver"
	if dup {
		kind = "duplicate"
	}
	n.s.After(d, Label{Kind: kind, From: n.nodes[c.from].name, To: n.nodes[c.to].name, What: c.what, ID: int64(c.id)}, func() {
		n.deliver(c, flags, handle, dup)
	})
}

func (n *Network) deliver(c *call, flags CallFlags, handle func(Reply), dup bool) {
	if c.suppressed || !n.nodes[c.to].up || n.nodes[c.to].inc != c.toInc {
		return // the connection was reset before the request arrived
	}
	if !dup {
		c.delivered = true
		if flags&Idempotent != 0 && n.s.Fault("net.duplicate") {
			n.deliverAfter(c, n.delay(c.from, c.to), flags, handle, true)
		}
	}
	toInc := n.nodes[c.to].inc
	answered := false
	handle(func(v any, err error) {
		if answered || dup {
			return
		}
		answered = true
		if n.nodes[c.to].inc != toInc || c.completed {
			return // the process that would answer died, or the caller gave up
		}
		if n.lost(c.to, c.from) {
			return
		}
		h := n.s.After(n.delay(c.to, c.from), Label{Kind: "reply", From: n.nodes[c.to].name, To: n.nodes[c.from].name, What: c.what, ID: int64(c.id)}, func() {
			n.complete(c, v, err)
		})
		if n.s.tape != nil {
			h.e.key = fmt.Sprintf("%v|%v", v, err)
		}
	})
}

func (n *Network) complete(c *call, v any, err error) {
	if c.completed {
		return
	}
	c.completed = true
	n.s.Cancel(c.timeout)
	delete(n.inflight, c.id)
	if n.nodes[c.from].inc != c.fromInc {
		return
	}
	c.done(v, err)
}

// forget drops a call whose caller died.
func (n *Network) forget(c *call) {
	c.completed = true
	n.s.Cancel(c.timeout)
	delete(n.inflight, c.id)
}

// Reset breaks the connections between a and b: every call in flight between them fails at
// once with an indeterminate outcome, and each request not yet delivered is, by a coin
// flip, either lost or still delivered (it may have applied).
func (n *Network) Reset(a, b NodeID) int {
	k := 0
	for _, c := range n.inflightSorted() {
		if (c.from == a && c.to == b) || (c.from == b && c.to == a) {
			if !c.delivered && (c.settled || !n.s.Chance(0.5)) {
				c.suppressed = true
			}
			n.complete(c, nil, &IndeterminateError{From: n.nodes[c.from].name, To: n.nodes[c.to].name, What: c.what, Cause: "reset"})
			k++
		}
	}
	n.s.Note(Label{Kind: "reset", From: n.nodes[a].name, To: n.nodes[b].name, ID: int64(k)})
	return k
}

// Cut loses every message from→to until Mend.
func (n *Network) Cut(from, to NodeID) {
	n.links[from][to].down = true
	n.s.Note(Label{Kind: "cut", From: n.nodes[from].name, To: n.nodes[to].name})
}

// Mend restores from→to.
func (n *Network) Mend(from, to NodeID) {
	n.links[from][to].down = false
	n.s.Note(Label{Kind: "mend", From: n.nodes[from].name, To: n.nodes[to].name})
}

// Slow multiplies the delays of from→to by factor (1 restores it).
func (n *Network) Slow(from, to NodeID, factor int64) {
	n.links[from][to].slow = max(factor, 1)
	n.s.Note(Label{Kind: "slow", From: n.nodes[from].name, To: n.nodes[to].name, ID: factor})
}

// healAll mends every link and restores every delay.
func (n *Network) healAll() {
	for i := range n.links {
		for j := range n.links[i] {
			n.links[i][j] = link{slow: 1}
		}
	}
	n.s.Note(Label{Kind: "heal"})
}

// Reachable reports whether a and b are both up and neither direction between them is
// cut: what a long-lived stream between them (logical replication) needs to make progress.
func (n *Network) Reachable(a, b NodeID) bool {
	return n.nodes[a].up && n.nodes[b].up && !n.links[a][b].down && !n.links[b][a].down
}

// InFlight is how many calls are waiting for an answer.
func (n *Network) InFlight() int { return len(n.inflight) }

// randomInflight picks a call in flight, for the reset nemesis, or false.
func (n *Network) randomInflight() (*call, bool) {
	if len(n.inflight) == 0 {
		return nil, false
	}
	cs := n.inflightSorted()
	return cs[n.s.Intn(len(cs))], true
}
