package scenario

import (
	"fmt"
	"strconv"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
)

// Bank is transfers between accounts under PgDog's two-phase commit while coordinators
// crash between prepare and decision (and after it), lose their log, and backends restart.
// It checks atomicity (no transaction both committed and rolled back, none resolved against
// its coordinator's decision) and conservation of money.
var Bank = detsim.Scenario{
	Name: "bank",
	Points: []string{"net.drop", "net.partition", "net.reset", "pgdog.crash", "backend.restart",
		"coord.crash.after_prepare", "coord.crash.after_decision", "coord.wal.lost"},
	Probes: []string{"fault:coord.crash.after_prepare", "fault:coord.crash.after_decision", "fault:coord.wal.lost",
		"fault:pgdog.crash", "fault:backend.restart", "model.2pc.recovery"},
	Mutants:     []string{MutantAckEarly},
	World:       bankWorld,
	Tiny:        bankTiny,
	TinyPoints:  []string{"coord.crash.after_prepare", "coord.crash.after_decision", "coord.wal.lost", "backend.restart"},
	TinyMutants: []string{MutantAckEarly},
}

func bankWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 2, mutant == MutantAckEarly))
	f.start(rec, true, s.Param("instances", 2+s.Intn(2)), s.Param("clients", 2+s.Intn(2)))
	f.crashes()
	n := s.Param("ops", 10+s.Intn(31))
	s.SetWorkload(n, transferOps(s, f, n))
	if v := f.runToEnd(60_000, 200_000); v != nil {
		return v
	}
	coords := make([]*model.Coordinator, len(f.routers))
	for i, r := range f.routers {
		coords[i] = r.Coordinator()
	}
	return check.Atomic(f.order, coords, monitorID, 0)
}

// transferOps generates n transfers between accounts a0..a5, schedules those kept, and
// returns how to describe them.
func transferOps(s *detsim.Sim, f *fleet, n int) func(int) string {
	desc := make([]func() string, n)
	var at int64
	for i := range n {
		at += s.Between(0, 600)
		a := s.Intn(6)
		b := (a + 1 + s.Intn(5)) % 6
		from, to := "a"+strconv.Itoa(a), "a"+strconv.Itoa(b)
		amount := 1 + s.Between(0, 99)
		client, via := s.Intn(len(f.clients)), s.Intn(len(f.routers))
		id := int64(i + 1)
		desc[i] = func() string {
			return fmt.Sprintf("t=%d client-%d via %s transfer %d %s->%s %d", at, client, f.routers[via].ID, id, from, to, amount)
		}
		if !s.KeepOp(i) {
			continue
		}
		s.At(at, detsim.Label{Kind: "op", What: "transfer", ID: id}, func() { f.transfer(client, via, id, from, to, amount) })
	}
	return func(i int) string { return desc[i]() }
}

// bankTiny is the exhaustive configuration: two shards, two instances, one client, one
// transfer across the shards.
func bankTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 2, mutant == MutantAckEarly))
	f.start(rec, true, 2, 1)
	f.crashes()
	f.hashState()
	var on [2]string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		on[model.Route(k, 2)] = k
	}
	s.At(0, detsim.Label{Kind: "op", ID: 1}, func() { f.transfer(0, 0, 1, on[0], on[1], 10) })
	s.StartNemesis()
	s.Run(400, 100_000)
	coords := []*model.Coordinator{f.routers[0].Coordinator(), f.routers[1].Coordinator()}
	if v := check.Atomic(f.order, coords, monitorID, 0); v != nil {
		return v
	}
	return detsim.Pruned(s)
}
