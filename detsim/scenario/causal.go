package scenario

import (
	"errors"
	"fmt"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine/causal"
)

// Causal is causal reads (machine/causal) in front of a Postgres primary and its streaming
// replicas, so the selector is tested against a world and not by unit properties alone:
// sessions write on the primary and read through the selector while replicas stall, lag
// and restart, the monitor's polls are lost, late and cut off, and heavy writes move the
// primary ahead of every replica. Invariants: causal-read (no read sees less than its
// session's last acknowledged write) and converges (once the faults heal, every session's
// last write-then-read is served).
//
// The replica model never rewinds: a restarted replica opens for reads where it stopped.
// (A real standby opens at its minimum recovery point, which can be before the position it
// reported before the crash; the selector's answer to that is the failed polls while it was
// down, which withdraw its progress. A world in which a standby restarts between two polls
// and comes back behind is not modelled yet.)
var Causal = detsim.Scenario{
	Name: "causal",
	Points: []string{"net.drop", "net.duplicate", "net.partition", "net.slow", "net.reset",
		"backend.restart", "replica.stall", "replica.lag"},
	Probes: []string{"fault:net.drop", "fault:net.duplicate", "fault:net.partition", "fault:net.slow", "fault:net.reset",
		"fault:backend.restart", "fault:replica.stall", "fault:replica.lag",
		"CausalRead.Wait", "CausalRead.Resolve", "CausalRead.Expire", "causal.read.next-endpoint"},
	Mutants: []string{MutantCausalIgnoreRequirement, MutantCausalSentAtReply, MutantCausalNoWake},
	World:   causalWorld,
}

const (
	// MutantCausalIgnoreRequirement is the selector routing a causal read to every member,
	// reached or not (causal.Mutants.IgnoreRequirement): a lagging replica serves it.
	MutantCausalIgnoreRequirement = "causal-ignore-requirement"
	// MutantCausalSentAtReply is a monitor that stamps a poll with the time its reply
	// arrived instead of the time it was sent: a position read before a commit then claims
	// to cover it (the late stamp lsn.Sample.Sent warns about).
	MutantCausalSentAtReply = "causal-sent-at-reply"
	// MutantCausalNoWake is the selector never waking a waiting read on a new sample
	// (causal.Mutants.NoWake): every read that has to wait expires.
	MutantCausalNoWake = "causal-no-wake"
)

// The writer and reader hostgroups.
const (
	hgWriter = 0
	hgReader = 1
)

// pgServer is one Postgres server of the causal world: the primary (lsn is its insert
// position) or a streaming replica (lsn is its replay position, advanced lazily from the
// primary's commit history, never backwards).
type pgServer struct {
	name    string
	id      detsim.NodeID
	ep      lsn.Endpoint
	primary bool
	lsn     uint64
	lag     int64 // ms behind the primary when replaying
	extra   int64 // added lag until extraUntil (replica.lag)
	extraTo int64
	stallTo int64 // replay stopped until (replica.stall)
	down    bool
}

type causalSession struct {
	name  string
	wrote uint64 // commit position of the last acknowledged write
	ops   []causalOp
	busy  bool
	final bool // the session's final read (after the heal) was served
}

type causalOp struct {
	index int // workload index (KeepOp), -1 for the final round
	write bool
	final bool
}

type causalRun struct {
	s        *detsim.Sim
	mutant   string
	m        *causal.Machine
	app      detsim.NodeID
	servers  []*pgServer // [0] is the primary
	byEP     map[lsn.Endpoint]*pgServer
	commits  []commit // the primary's commits in order
	sessions []*causalSession
	timers   map[string]detsim.Handle
	reads    map[uint64]*causalRead
	served   []check.CausalRead
	nextID   uint64
	acquire  int64 // acquisition deadline, ms after the request
	poll     int64 // monitor interval, ms
	think    int64
}

type commit struct {
	at  int64
	lsn uint64
}

type causalRead struct {
	sess  *causalSession
	op    causalOp
	wrote uint64
	eps   []lsn.Endpoint
}

func causalWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	w := &causalRun{s: s, mutant: mutant, timers: map[string]detsim.Handle{}, reads: map[uint64]*causalRead{},
		byEP: map[lsn.Endpoint]*pgServer{}}
	w.m = causal.New(causal.Config{Window: 60_000, Mutants: causal.Mutants{
		IgnoreRequirement: mutant == MutantCausalIgnoreRequirement,
		NoWake:            mutant == MutantCausalNoWake,
	}})
	w.app = s.Net.AddNode("app")
	replicas := s.Param("replicas", 1+s.Intn(3))
	w.acquire = int64(s.Param("acquire-ms", 5000+1000*s.Intn(6)))
	w.poll = int64(s.Param("poll-ms", 50+50*s.Intn(10)))
	w.think = int64(s.Param("think-ms", 100+200*s.Intn(8)))
	for i := range replicas + 1 {
		name := "pg-primary"
		if i > 0 {
			name = fmt.Sprintf("pg-replica-%d", i)
		}
		srv := &pgServer{name: name, id: s.Net.AddNode(name), ep: lsn.Endpoint{Host: name, Port: 5432}, primary: i == 0}
		if i > 0 {
			srv.lag = s.Between(0, 200)
		}
		w.servers = append(w.servers, srv)
		w.byEP[srv.ep] = srv
	}
	w.commits = []commit{{0, 1}}
	w.servers[0].lsn = 1
	readers := []lsn.Endpoint{}
	for _, srv := range w.servers[1:] {
		readers = append(readers, srv.ep)
	}
	if s.Param("primary-reads", s.Intn(3)) == 0 {
		readers = append(readers, w.servers[0].ep) // the reader hostgroup holds the primary too
	}
	w.feed(causal.SetHostgroup{Hostgroup: hgWriter, Endpoints: []lsn.Endpoint{w.servers[0].ep}})
	w.feed(causal.SetHostgroup{Hostgroup: hgReader, Endpoints: readers})
	for _, srv := range w.servers {
		w.pollLoop(srv, s.Between(0, w.poll))
	}
	w.heavyWrites(s.Param("heavy-writes", s.Intn(2)) == 1)
	w.nemesis()

	n := s.Param("ops", 20+s.Intn(41))
	for i := range s.Param("sessions", 1+s.Intn(4)) {
		w.sessions = append(w.sessions, &causalSession{name: fmt.Sprintf("session-%d", i+1)})
	}
	describe := make([]string, n)
	for i := range n {
		sess := w.sessions[s.Intn(len(w.sessions))]
		op := causalOp{index: i, write: s.Intn(2) == 0}
		describe[i] = fmt.Sprintf("%s %s", sess.name, map[bool]string{true: "write", false: "read"}[op.write])
		if s.KeepOp(i) {
			sess.ops = append(sess.ops, op)
		}
	}
	s.SetWorkload(n, func(i int) string { return describe[i] })
	for _, sess := range w.sessions {
		s.After(s.Between(0, w.think), detsim.Label{Kind: "op", What: "session", From: sess.name}, func() { w.next(sess) })
	}
	fw := s.Options().Net.FaultWindow
	s.At(fw+3000, detsim.Label{Kind: "op", What: "final-round"}, func() {
		for _, sess := range w.sessions {
			// What the session had left of its workload is dropped: the round must start now.
			sess.ops = []causalOp{{index: -1, write: true}, {index: -1, final: true}}
			if !sess.busy {
				w.next(sess)
			}
		}
	})
	s.StartNemesis()
	end := fw + 30_000
	const maxSteps = 400_000
	steps := s.Run(end, maxSteps)
	if steps == maxSteps {
		return &detsim.Violation{Invariant: "step-budget", T: s.Now(),
			Detail: fmt.Sprintf("the run used its %d steps before t=%d", maxSteps, end)}
	}
	if v := check.CausalReads(w.served); v != nil {
		return v
	}
	for _, sess := range w.sessions {
		if !sess.final {
			return &detsim.Violation{Invariant: "converges", T: s.Now(),
				Detail: fmt.Sprintf("%s: its write-then-read after the faults healed (t=%d) was never served by t=%d", sess.name, fw+3000, end)}
		}
	}
	return nil
}

// feed runs one input through the selector and executes its commands.
func (w *causalRun) feed(in causal.Input) {
	for _, c := range w.m.On(w.s.Ctx(0), in) {
		switch c := c.(type) {
		case causal.Route:
			w.route(c)
		case causal.Fail:
			r := w.reads[c.ID]
			delete(w.reads, c.ID)
			w.s.Note(detsim.Label{Kind: "read-failed", From: r.sess.name, What: c.Err.Error(), ID: int64(c.ID)})
			w.done(r.sess) // the selector gave up on it: after the heal, converges calls that a failure
		case causal.SetTimer:
			id := c.ID
			w.timers[id] = w.s.At(c.At, detsim.Label{Kind: "timer", What: id}, func() {
				delete(w.timers, id)
				w.feed(causal.TimerFired{ID: id})
			})
		case causal.CancelTimer:
			w.s.Cancel(w.timers[c.ID])
			delete(w.timers, c.ID)
		}
	}
}

// position brings srv's replay position up to now and returns it.
func (w *causalRun) position(srv *pgServer) uint64 {
	now := w.s.Now()
	if srv.primary || srv.down || now < srv.stallTo {
		return srv.lsn
	}
	lag := srv.lag
	if now < srv.extraTo {
		lag += srv.extra
	}
	i, _ := slices.BinarySearchFunc(w.commits, now-lag+1, func(c commit, t int64) int { return int(c.at - t) })
	if i > 0 && w.commits[i-1].lsn > srv.lsn {
		srv.lsn = w.commits[i-1].lsn
	}
	return srv.lsn
}

func (w *causalRun) commitOn(n uint64) uint64 {
	p := w.servers[0]
	p.lsn += n
	w.commits = append(w.commits, commit{w.s.Now(), p.lsn})
	return p.lsn
}

// call is a call from the application with the client's own deadline (callDeadline): done
// runs once, with the answer or, once the deadline passes, with errCallDeadline (a
// refusal from a down server on a slow link takes twice the link's delay, which a
// client's connect timeout does not wait for). A late answer is ignored.
func (w *causalRun) call(srv *pgServer, what string, flags detsim.CallFlags, handle func(detsim.Reply), done func(any, error)) {
	settled := false
	settle := func(v any, err error) {
		if !settled {
			settled = true
			done(v, err)
		}
	}
	w.s.After(callDeadline, detsim.Label{Kind: "deadline", To: srv.name, What: what}, func() { settle(nil, errCallDeadline) })
	w.s.Net.Call(w.app, srv.id, what, flags, handle, settle)
}

// callDeadline is the application's and the monitor's deadline for one call, ms.
const callDeadline = 1000

var errCallDeadline = errors.New("scenario causal: no answer within the client's deadline")

// pollLoop is the monitor's poller of one server: one poll in flight at a time, so samples
// arrive in send order; a poll that fails or misses its deadline is an unknown sample.
func (w *causalRun) pollLoop(srv *pgServer, after int64) {
	w.s.After(after, detsim.Label{Kind: "poll", To: srv.name}, func() {
		sent := w.s.Now()
		w.call(srv, "poll", detsim.Idempotent, func(r detsim.Reply) {
			r(w.position(srv), nil)
		}, func(v any, err error) {
			smp := lsn.Unknown(sent)
			if err == nil {
				smp = lsn.Observed(sent, lsn.LSN(v.(uint64)))
			}
			if w.mutant == MutantCausalSentAtReply {
				smp.Sent = w.s.Now()
			}
			w.feed(causal.Sampled{Endpoint: srv.ep, Sample: smp})
			w.pollLoop(srv, w.poll)
		})
	})
}

// heavyWrites are other clients' writes on the primary: with heavy set, large and frequent,
// so the replicas' first polls show a large lag.
func (w *causalRun) heavyWrites(heavy bool) {
	every, size := int64(500), int64(100)
	if heavy {
		every, size = 50, 50_000
	}
	var tick func()
	tick = func() {
		if !w.servers[0].down {
			w.commitOn(uint64(w.s.Between(1, size)))
		}
		w.s.After(w.s.Between(every/2, every), detsim.Label{Kind: "op", What: "background-write"}, tick)
	}
	w.s.After(w.s.Between(0, every), detsim.Label{Kind: "op", What: "background-write"}, tick)
}

func (w *causalRun) nemesis() {
	s := w.s
	s.OnNemesis("backend.restart", func() {
		srv := w.servers[s.Intn(len(w.servers))]
		if srv.down {
			return
		}
		w.position(srv) // replay stops where it is
		srv.down = true
		s.Net.Crash(srv.id)
		s.After(s.Between(200, 5000), detsim.Label{Kind: "nemesis", What: "restart", To: srv.name}, func() { w.restart(srv) })
	})
	s.OnNemesis("replica.stall", func() {
		if len(w.servers) < 2 {
			return
		}
		srv := w.servers[1+s.Intn(len(w.servers)-1)]
		w.position(srv)
		srv.stallTo = max(srv.stallTo, s.Now()+s.Between(1000, 10_000))
	})
	s.OnNemesis("replica.lag", func() {
		if len(w.servers) < 2 {
			return
		}
		srv := w.servers[1+s.Intn(len(w.servers)-1)]
		w.position(srv)
		srv.extra, srv.extraTo = s.Between(1000, 5000), s.Now()+s.Between(2000, 15_000)
	})
	s.OnHeal(func() {
		for _, srv := range w.servers {
			w.position(srv)
			srv.stallTo, srv.extraTo = 0, 0
			w.restart(srv)
		}
	})
}

func (w *causalRun) restart(srv *pgServer) {
	if srv.down {
		srv.down = false
		w.s.Net.Restart(srv.id)
	}
}

// next starts the session's next operation after its think time, or leaves it idle.
func (w *causalRun) next(sess *causalSession) {
	if len(sess.ops) == 0 {
		sess.busy = false
		return
	}
	sess.busy = true
	op := sess.ops[0]
	sess.ops = sess.ops[1:]
	if op.write {
		w.write(sess, op)
		return
	}
	w.read(sess, op)
}

// failed ends a read whose route's every endpoint failed (a call that timed out). A failed
// final read is asked again, as a client retries a read that timed out: after the heal, a
// call can still miss its deadline on the network's tail latency, and converges asks that
// the session is served eventually. A read the selector itself failed is not asked again.
func (w *causalRun) failed(r *causalRead) {
	if r.op.final {
		r.sess.ops = append([]causalOp{r.op}, r.sess.ops...)
	}
	w.done(r.sess)
}

func (w *causalRun) done(sess *causalSession) {
	if len(sess.ops) > 0 && sess.ops[0].index < 0 {
		w.next(sess) // the final round runs back to back
		return
	}
	w.s.After(w.s.Between(0, w.think), detsim.Label{Kind: "op", What: "session", From: sess.name}, func() { w.next(sess) })
}

func (w *causalRun) write(sess *causalSession, op causalOp) {
	p := w.servers[0]
	w.call(p, "write", 0, func(r detsim.Reply) {
		r(w.commitOn(uint64(w.s.Between(1, 200))), nil)
	}, func(v any, err error) {
		if err == nil {
			sess.wrote = v.(uint64)
			w.s.Note(detsim.Label{Kind: "ack", From: sess.name, What: "write", ID: int64(sess.wrote)})
			w.feed(causal.Executed{Frontend: sess.name, Hostgroup: hgWriter, Endpoint: p.ep})
		}
		w.done(sess)
	})
}

func (w *causalRun) read(sess *causalSession, op causalOp) {
	w.nextID++
	id := w.nextID
	w.reads[id] = &causalRead{sess: sess, op: op, wrote: sess.wrote}
	w.feed(causal.AcquireCausal{ID: id, Frontend: sess.name, Hostgroup: hgReader, From: hgWriter,
		Deadline: w.s.Now() + w.acquire})
}

// route tries the endpoints of a route in order, as a pool acquiring a connection does.
func (w *causalRun) route(c causal.Route) {
	r := w.reads[c.ID]
	delete(w.reads, c.ID)
	r.eps = c.Endpoints
	w.try(c.ID, r, 0)
}

func (w *causalRun) try(id uint64, r *causalRead, i int) {
	if i == len(r.eps) {
		w.s.Note(detsim.Label{Kind: "read-failed", From: r.sess.name, What: "every endpoint of the route failed", ID: int64(id)})
		w.failed(r)
		return
	}
	if i > 0 {
		w.s.Probe("causal.read.next-endpoint")
	}
	srv := w.byEP[r.eps[i]]
	w.call(srv, "read", detsim.Idempotent, func(rep detsim.Reply) {
		rep(w.position(srv), nil)
	}, func(v any, err error) {
		if err != nil {
			w.try(id, r, i+1)
			return
		}
		saw := v.(uint64)
		w.served = append(w.served, check.CausalRead{Session: r.sess.name, ID: id, Endpoint: srv.name,
			Wrote: r.wrote, Saw: saw, T: w.s.Now()})
		w.s.Note(detsim.Label{Kind: "read", From: r.sess.name, To: srv.name, ID: int64(saw)})
		if r.op.final {
			r.sess.final = true
		}
		w.feed(causal.Executed{Frontend: r.sess.name, Hostgroup: hgReader, Endpoint: srv.ep})
		w.done(r.sess)
	})
}
