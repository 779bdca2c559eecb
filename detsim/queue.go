package detsim

// event is one scheduled happening: a message delivery, a reply, a timeout, a machine
// timer, a workload operation, a nemesis tick. Its label is what the trace hash sees.
type event struct {
	at  int64  // simulated time it is due, ms
	tie uint64 // random tie-break among events due at the same time (sample mode)
	idx int    // position in the queue, -1 once removed
	gen uint64 // bumped each time the struct is reused, so an old Handle cannot reach it
	Label
	// key is extra identity for the explorer's state hash (a reply's payload); it is set
	// only when exploring and is not part of the trace.
	key string
	fn  func()
}

// Label names an event in the trace: what kind of event, between which nodes, about what.
// It is hashed as one canonical JSON line, so it must be a function of the schedule alone
// (no pointers, no map order).
type Label struct {
	Kind string // deliver, reply, timeout, timer, op, nemesis, ...
	From string
	To   string
	What string
	ID   int64
}

// queue is a binary min-heap on (at, tie). Removal by index keeps cancelled timers out of
// the ready set, which matters to the explorer: a dead event would be a choice that does
// nothing.
type queue []*event

func (q queue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].tie < q[j].tie
}

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx = i
	q[j].idx = j
}

func (q *queue) push(e *event) {
	e.idx = len(*q)
	*q = append(*q, e)
	q.up(e.idx)
}

// remove takes the event at position i out of the queue.
func (q *queue) remove(i int) *event {
	old := *q
	n := len(old) - 1
	e := old[i]
	if i != n {
		old.swap(i, n)
	}
	old[n] = nil
	*q = old[:n]
	if i != n {
		if !q.down(i) {
			q.up(i)
		}
	}
	e.idx = -1
	return e
}

func (q queue) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		j = i
	}
}

func (q queue) down(i0 int) bool {
	i := i0
	n := len(q)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && q.less(r, l) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		i = j
	}
	return i > i0
}
