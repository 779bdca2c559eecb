package scenario

import (
	"slices"
	"strconv"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// The cutover scenario's window points (cutoverWindowPoints, issue 20 item 4): each opens,
// in the runs the swarm turns it on, a window the other faults make rare. The executor
// evaluates each once, at the first command the window is about (pgdog.held when the world
// is built), so a run has it or not; the window worlds (c.w set) open their own instead.

// fenceFault evaluates backend.fence.fail_slow at the cutover's first Fence: when it fires,
// one source shard's fence is slow from then on (fenceSlow) and another shard's, of either
// layout, fails for good (fenceBroken). The fence stage then fails, and the rollback must
// not unfence the slow shard while one of its Fence attempts may still land.
func (c *cutoverRun) fenceFault() {
	if c.fenceDrawn || c.w != nil {
		return
	}
	c.fenceDrawn = true
	s := c.d.f.s
	if !s.Fault("backend.fence.fail_slow") {
		return
	}
	slow := c.src[s.Intn(len(c.src))]
	others := slices.DeleteFunc(append(slices.Clone(c.src), c.dst...), func(b shardmap.Backend) bool { return b.Host == slow.Host })
	c.fenceSlow, c.fenceBroken = slow.Host, others[s.Intn(len(others))].Host
}

// heavyWrites evaluates writes.heavy at the cutover's first COPY_DATA: when it fires, every
// instance's replication streams carry at most heavyStreamRate changes a second from then
// on, and a client of its own writes a burst of 100 to 300 appends, one every 2 ms,
// through the instances in turn, so the copy's slot holds a backlog when its stream
// starts and the first polls show a large lag.
func (c *cutoverRun) heavyWrites() {
	if c.heavyDrawn || c.w != nil {
		return
	}
	c.heavyDrawn = true
	f := c.d.f
	s := f.s
	if !s.Fault("writes.heavy") {
		return
	}
	for _, r := range f.routers {
		r.StreamRate = heavyStreamRate
	}
	f.clients = append(f.clients, s.Net.AddNode("heavy"))
	client := len(f.clients) - 1
	n := int(s.Between(100, 300))
	for i := range n {
		id := int64(10_000 + i)
		txn := model.Txn{ID: id, Ops: []model.Op{{Kind: model.OpAppend, Key: "heavy" + strconv.Itoa(i%4), Value: id}}}
		s.After(int64(2*i), detsim.Label{Kind: "op", What: "heavy", ID: id}, func() { f.query(client, i%len(f.routers), txn) })
	}
}

// heavyStreamRate is the streams' throughput under writes.heavy, changes a second: a burst
// of 300 drains in 6 s, within PgDog's cutover_timeout (30 s).
const heavyStreamRate = 50

// holdStatements opens fault pgdog.held (evaluated when the world was built, c.held) at
// the cutover's first Pause: an instance other than the designated one is chosen
// (c.stuck), whose every PAUSE the executor refuses, its links to the source shards
// holding statements (holdLinks).
func (c *cutoverRun) holdStatements() {
	if !c.held || c.stuck != nil {
		return
	}
	f := c.d.f
	i := (routerIndex(f, c.designated) + 1 + f.s.Intn(len(f.routers)-1)) % len(f.routers)
	c.stuck = holdLinks(f, c, i)
}

// holdLinks makes the links from instance i to the source shards slow, enough that a
// statement is still travelling for a few of the controller's round trips but not so slow
// that it outlives the call timeout (then it is dropped, or refused on a session the fence
// ended), after the faults heal too, and starts three clients writing through it in a
// closed loop until the cutover is done. It returns the instance.
func holdLinks(f *fleet, c *cutoverRun, i int) *model.Router {
	s := f.s
	stuck := f.routers[i]
	net := s.Options().Net
	slow := s.Between(10, max(10, 3*net.CallTimeout/(4*max(net.DelayMax, 1))))
	hold := func() {
		for _, b := range f.order[:len(f.order)/2] { // the source shards
			s.Net.Slow(stuck.Node, b.Node, slow)
		}
	}
	hold()
	s.OnHeal(hold) // the statements are held after the faults heal too
	for k := range 3 {
		closedLoop(f, c, i, "held"+strconv.Itoa(k), int64(20_000+10_000*k), 0)
	}
	return stuck
}

// lateReplies is ctl.reply.late: back, with each failed answer evaluating the point and,
// when it fires, fed to the machine a second time, late enough that the step's next
// attempt (retry, RetryAfter and its jitter later) is out.
func lateReplies(s *detsim.Sim, retry int64, back func(cutover.Input)) func(cutover.Input) {
	return func(in cutover.Input) {
		back(in)
		if answerErr(in) != nil && s.Fault("ctl.reply.late") {
			at := 3*retry/2 + s.Between(10, s.Options().Net.CallTimeout/2)
			s.After(at, detsim.Label{Kind: "reply", What: "late"}, func() { back(in) })
		}
	}
}
