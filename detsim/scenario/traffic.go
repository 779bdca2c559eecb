package scenario

import (
	"fmt"
	"strconv"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
)

// Traffic is list-append transactions and plain writes through router instances over a
// fixed layout while instances crash, backends restart and the network misbehaves. No
// control-plane machine runs: it checks the data path itself (no acknowledged write lost,
// snapshot isolation per shard, no phantom), and the backend mutant that acknowledges
// before it is durable.
var Traffic = detsim.Scenario{
	Name: "traffic",
	Points: []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset",
		"pgdog.crash", "backend.restart"},
	Probes: []string{"fault:net.drop", "fault:net.duplicate", "fault:net.partition", "fault:net.slow", "fault:net.reset",
		"fault:pgdog.crash", "fault:backend.restart", "net.partition.asymmetric", "net.reset.inflight"},
	Mutants:     []string{MutantAckEarly},
	World:       trafficWorld,
	Tiny:        trafficTiny,
	TinyPoints:  []string{"pgdog.crash", "backend.restart"},
	TinyMutants: []string{MutantAckEarly},
}

// MutantAckEarly makes every backend acknowledge a commit before it is durable.
const MutantAckEarly = "backend-ack-early"

func trafficWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	shards := s.Param("shards", 1+s.Intn(3))
	rec := pgHash(1, f.backends(0, shards, mutant == MutantAckEarly))
	f.start(rec, false, s.Param("instances", 2+s.Intn(2)), s.Param("clients", 2+s.Intn(3)))
	f.crashes()
	n := s.Param("ops", 20+s.Intn(41))
	s.SetWorkload(n, listAppendOps(s, f, n, 0))
	if v := f.runToEnd(30_000, 200_000); v != nil {
		return v
	}
	return check.ListAppend(f.hist, f.finalRow(hostsOf(rec.Layout)))
}

// listAppendOps generates n single-key transactions (appends of unique values and reads)
// over a small key space, spread over the clients and instances, starting at t0, and
// schedules those the run keeps. It returns how to describe them.
func listAppendOps(s *detsim.Sim, f *fleet, n int, t0 int64) func(int) string {
	keys := s.Param("keys", 3+s.Intn(6))
	type gen struct {
		at          int64
		client, via int
		txn         model.Txn
	}
	gens := make([]gen, n)
	at := t0
	for i := range n {
		at += s.Between(0, 400)
		key := "k" + strconv.Itoa(s.Intn(keys))
		var ops []model.Op
		for j := range 1 + s.Intn(3) {
			if s.Intn(3) == 0 {
				ops = append(ops, model.Op{Kind: model.OpRead, Key: key})
			} else {
				ops = append(ops, model.Op{Kind: model.OpAppend, Key: key, Value: int64(i*10 + j + 1)})
			}
		}
		client, via := s.Intn(len(f.clients)), s.Intn(len(f.routers))
		txn := model.Txn{ID: int64(i + 1), Ops: ops}
		gens[i] = gen{at, client, via, txn}
		if !s.KeepOp(i) {
			continue
		}
		s.At(at, detsim.Label{Kind: "op", What: "txn", ID: txn.ID}, func() { f.query(client, via, txn) })
	}
	return func(i int) string {
		g := gens[i]
		return fmt.Sprintf("t=%d client-%d via %s txn %d %v", g.at, g.client, f.routers[g.via].ID, g.txn.ID, g.txn.Ops)
	}
}

// trafficTiny is the exhaustive configuration: two shards, two instances, one client, two
// appends on different shards, and backend restarts and instance crashes as the faults.
func trafficTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 2, mutant == MutantAckEarly))
	f.start(rec, false, 2, 1)
	f.crashes()
	f.hashState()
	keys := []string{"a", "b", "c", "d", "e"}
	var on [2]string
	for _, k := range keys {
		on[model.Route(k, 2)] = k
	}
	for i, k := range on {
		txn := model.Txn{ID: int64(i + 1), Ops: []model.Op{{Kind: model.OpAppend, Key: k, Value: int64(i + 1)}}}
		s.At(int64(i), detsim.Label{Kind: "op", ID: txn.ID}, func() { f.query(0, i, txn) })
	}
	s.StartNemesis()
	s.Run(300, 100_000)
	// A run the explorer cut is checked too: its future was explored from the same state
	// on another path, but what happened on this path before it was not checked.
	if v := check.ListAppend(f.hist, f.finalRow(hostsOf(rec.Layout))); v != nil {
		return v
	}
	return detsim.Pruned(s)
}
