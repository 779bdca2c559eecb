package detsim_test

import (
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"

	"loam.dev/router/detsim"
	_ "loam.dev/router/detsim/simtest" // the replay flags
)

// The toy scenario exercises the framework on its own: a client appends numbered values
// to a log server over the simulated network; the server restarts now and then. Checker:
// no acknowledged append is missing from the log at the end. Mutant "ack-early" acks an
// append before it is durable (it is flushed 100 ms later), so a restart in between loses
// an acknowledged append.
type toyServer struct {
	s       *detsim.Sim
	id      detsim.NodeID
	early   bool
	log     []int // durable
	buffer  []int // acknowledged but not yet durable (mutant only)
	flushed detsim.Handle
}

func (v *toyServer) append(x int, reply detsim.Reply) {
	if !v.early {
		v.log = append(v.log, x)
		reply(len(v.log), nil)
		return
	}
	v.buffer = append(v.buffer, x)
	reply(len(v.log)+len(v.buffer), nil)
	if !v.flushed.Pending() {
		v.flushed = v.s.After(100, detsim.Label{Kind: "flush", To: "server"}, func() {
			v.log = append(v.log, v.buffer...)
			v.buffer = nil
		})
	}
}

func (v *toyServer) crash() {
	v.s.Net.Crash(v.id)
	v.s.Cancel(v.flushed)
	v.buffer = nil // not durable: lost
	v.s.After(200, detsim.Label{Kind: "boot", To: "server"}, func() { v.s.Net.Restart(v.id) })
}

var toy = detsim.Scenario{
	Name:    "toy",
	Points:  []string{"net.drop", "net.duplicate", "net.partition", "net.reset", "net.slow", "backend.restart"},
	Probes:  []string{"fault:backend.restart", "fault:net.drop"},
	Mutants: []string{"ack-early"},
	World:   toyWorld,
}

func toyWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	client := s.Net.AddNode("client")
	srv := &toyServer{s: s, early: mutant == "ack-early"}
	srv.id = s.Net.AddNode("server")
	n := s.Param("ops", 5+s.Intn(16))
	ats := make([]int64, n)
	acked := map[int]bool{}
	for i := range n {
		at := int64(i) * s.Between(20, 200)
		ats[i] = at
		if !s.KeepOp(i) {
			continue
		}
		s.At(at, detsim.Label{Kind: "op", From: "client", What: "append", ID: int64(i)}, func() {
			s.Net.Call(client, srv.id, "append "+strconv.Itoa(i), 0,
				func(r detsim.Reply) { srv.append(i, r) },
				func(_ any, err error) {
					switch {
					case err == nil:
						acked[i] = true
						s.Note(detsim.Label{Kind: "ack", What: "append", ID: int64(i)})
					case errors.Is(err, detsim.ErrIndeterminate):
						// may have applied: nothing to check
					}
				})
		})
	}
	s.SetWorkload(n, func(i int) string { return fmt.Sprintf("t=%d append %d", ats[i], i) })
	s.OnNemesis("backend.restart", func() {
		if s.Net.Up(srv.id) {
			srv.crash()
		}
	})
	s.OnHeal(func() { s.Net.Restart(srv.id) })
	s.StartNemesis()
	s.Run(math.MaxInt64, 1_000_000)
	if v := detsim.Pruned(s); v != nil {
		return v
	}
	return toyCheck(s, srv, acked, n)
}

func toyCheck(s *detsim.Sim, srv *toyServer, acked map[int]bool, n int) *detsim.Violation {
	all := append(slices.Clone(srv.log), srv.buffer...)
	for i := range n {
		if acked[i] && !slices.Contains(all, i) {
			return &detsim.Violation{Invariant: "no-lost-ack", T: s.Now(),
				Detail: fmt.Sprintf("append %d was acknowledged but the log is %v", i, srv.log)}
		}
	}
	return nil
}

// toyExplore is the tiny configuration of the toy for exhaustive mode: two appends, one
// restart at most.
func toyExplore(mutant string) func(t *detsim.Tape) *detsim.Violation {
	var srv *toyServer
	var acked map[int]bool
	return func(t *detsim.Tape) *detsim.Violation {
		s := detsim.New(detsim.Config{Scenario: "toy", Explore: t, Points: []string{"backend.restart"}})
		client := s.Net.AddNode("client")
		srv = &toyServer{s: s, early: mutant == "ack-early"}
		srv.id = s.Net.AddNode("server")
		acked = map[int]bool{}
		for i := range 2 {
			s.At(int64(i), detsim.Label{Kind: "op", ID: int64(i)}, func() {
				s.Net.Call(client, srv.id, "append "+strconv.Itoa(i), 0,
					func(r detsim.Reply) { srv.append(i, r) },
					func(_ any, err error) {
						if err == nil {
							acked[i] = true
						}
					})
			})
		}
		s.OnNemesis("backend.restart", func() {
			if s.Net.Up(srv.id) {
				srv.crash()
			}
		})
		s.SetStateHasher(func(h hash.Hash) { fmt.Fprintf(h, "%v|%v|%v", srv.log, srv.buffer, acked) })
		s.StartNemesis()
		s.Run(400, 10_000)
		// A run the explorer cut is checked too: it stopped in a state whose future was
		// explored already, but what happened before it has not been checked on this path.
		if v := toyCheck(s, srv, acked, 2); v != nil {
			return v
		}
		return detsim.Pruned(s)
	}
}
