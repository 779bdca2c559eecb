package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
)

// ErrAborted is a 2PC transaction the coordinator rolled back everywhere: it did not apply.
var ErrAborted = errors.New("model: two-phase transaction aborted and rolled back")

// Coordinator is PgDog's two-phase commit coordinator inside one instance. It names a
// transaction's branch on each shard __pgdog_2pc_<deployment>_<instance>_<n>_<shard>, where
// shard is the branch's position among the transaction's shards; it logs each transaction
// before PREPARE and the commit decision before COMMIT PREPARED, and on restart finishes
// what its log holds: commit what was decided, roll back the rest. Without its log (the
// WAL directory not on a persistent volume, fault coord.wal.lost) it cannot, and the
// prepared transactions stay in doubt until an operator resolves them.
type Coordinator struct {
	r *Router
	// Deployment is PgDog's DEPLOYMENT_ID.
	Deployment string
	wal        map[string]*walEntry
	seq        int
	epoch      int // bumped by a crash: work of an earlier life stops
	// Decisions is every commit or abort decision, and Begun every transaction started, for
	// the checkers.
	Decisions []Decision
	Begun     []Begin
	// CommitEarly is the mutant "commit a branch as soon as it is prepared": a branch is
	// committed before the other is known to be prepared, so a failed prepare leaves the
	// transaction half committed. It trips 2pc-atomic.
	CommitEarly bool
}

// Begin is one two-phase transaction a coordinator started.
type Begin struct {
	T   int64
	GID string // the transaction's name (branches add _<position>)
	// Inc is the instance's incarnation when it began: the process that must finish it.
	Inc uint64
}

// Decision is one coordinator decision.
type Decision struct {
	T int64
	// GID is the transaction's name: each branch's gid is GID_<position>.
	GID      string
	Commit   bool
	Recovery bool // taken by recovery after a restart
}

type walEntry struct {
	gid     string
	parts   []part
	decided bool // the commit decision is logged
}

type part struct {
	backend string
	gid     string
	txn     Txn
}

func newCoordinator(r *Router) *Coordinator {
	return &Coordinator{r: r, Deployment: "sim-app", wal: map[string]*walEntry{}}
}

// Coordinator returns the instance's 2PC coordinator.
func (r *Router) Coordinator() *Coordinator { return r.coord }

// GIDPrefix is the prefix of every gid the instance's running process writes.
func (c *Coordinator) GIDPrefix() string {
	return "__pgdog_2pc_" + c.Deployment + "_" + c.r.ProcessID() + "_"
}

func (c *Coordinator) crash() { c.epoch++ }

// recover runs after a restart: coord.wal.lost empties the log first.
func (c *Coordinator) recover() {
	if c.r.s.Fault("coord.wal.lost") {
		c.wal = map[string]*walEntry{}
	}
	for _, gid := range slices.Sorted(maps.Keys(c.wal)) {
		e := c.wal[gid]
		c.Decisions = append(c.Decisions, Decision{T: c.r.s.Now(), GID: gid, Commit: e.decided, Recovery: true})
		c.r.s.Probe("model.2pc.recovery")
		c.finish(e, e.decided, func() {})
	}
}

// Transfer moves amount from one account to another. Accounts on one shard take one
// transaction; accounts on two take two-phase commit. The answer is nil when committed,
// ErrAborted when rolled back everywhere, or an indeterminate error.
func (r *Router) Transfer(db string, id int64, from, to string, amount int64, reply detsim.Reply) {
	shards := r.routes[db]
	if r.paused[db] || len(shards) == 0 || !r.twoPC {
		reply(nil, &adapters.RouterError{Instance: r.ID, Op: "Transfer", Code: "55000",
			Err: fmt.Errorf("database %q is paused, unknown, or has two-phase commit off", db)})
		return
	}
	a, b := Route(from, len(shards)), Route(to, len(shards))
	debit := Op{Kind: OpAdd, Key: from, Value: -amount}
	credit := Op{Kind: OpAdd, Key: to, Value: amount}
	if a == b {
		r.dispatch(db, Txn{ID: id, Ops: []Op{debit, credit}}, reply)
		return
	}
	c := r.coord
	c.seq++
	gid := c.GIDPrefix() + strconv.Itoa(c.seq)
	e := &walEntry{gid: gid, parts: []part{
		{shards[a], gid + "_0", Txn{ID: id, Ops: []Op{debit}}},
		{shards[b], gid + "_1", Txn{ID: id, Ops: []Op{credit}}},
	}}
	c.wal[gid] = e
	c.Begun = append(c.Begun, Begin{T: r.s.Now(), GID: gid, Inc: r.s.Net.Incarnation(r.Node)})
	epoch := c.epoch
	left, failed := len(e.parts), false
	for _, p := range e.parts {
		c.call(p.backend, "prepare "+p.gid, func(be *Backend, sess uint64) (uint64, error) {
			return be.Prepare(r.Role, sess, p.gid, p.txn)
		}, func(err error) {
			if c.epoch != epoch {
				return
			}
			if c.CommitEarly && err == nil {
				c.finish(&walEntry{gid: gid, parts: []part{p}}, true, func() {})
			}
			failed = failed || err != nil
			if left--; left > 0 {
				return
			}
			if failed {
				c.Decisions = append(c.Decisions, Decision{T: r.s.Now(), GID: gid})
				c.finish(e, false, func() { reply(nil, fmt.Errorf("%s: %w", gid, ErrAborted)) })
				return
			}
			if r.s.Fault("coord.crash.after_prepare") {
				r.Crash()
				return
			}
			e.decided = true
			c.Decisions = append(c.Decisions, Decision{T: r.s.Now(), GID: gid, Commit: true})
			if r.s.Fault("coord.crash.after_decision") {
				r.Crash()
				return
			}
			c.finish(e, true, func() { reply(nil, nil) })
		})
	}
}

// finish commits or rolls back every participant, retrying until each has answered
// definitely, then drops the log entry and calls done.
func (c *Coordinator) finish(e *walEntry, commit bool, done func()) {
	epoch := c.epoch
	left := len(e.parts)
	for _, p := range e.parts {
		backoff := int64(200)
		var try func()
		try = func() {
			if c.epoch != epoch {
				return
			}
			c.call(p.backend, "resolve "+p.gid, func(be *Backend, sess uint64) (uint64, error) {
				return be.Resolve(c.r.Role, sess, p.gid, commit, c.r.ID)
			}, func(err error) {
				if c.epoch != epoch {
					return
				}
				// An undefined gid means an earlier attempt whose answer was lost resolved
				// it already (or someone else did: the checkers see who); anything else, a
				// refused login included, is retried.
				var be *adapters.BackendError
				definite := err == nil || (errors.As(err, &be) && be.Code == CodeUndefined)
				if !definite {
					c.r.s.After(backoff, detsim.Label{Kind: "2pc-retry", To: c.r.ID, What: e.gid}, try)
					backoff = min(2*backoff, 5000)
					return
				}
				if left--; left == 0 {
					delete(c.wal, e.gid)
					done()
				}
			})
		}
		try()
	}
}

// call runs f at a backend over the network in the instance's session and answers err.
func (c *Coordinator) call(backend, what string, f func(*Backend, uint64) (uint64, error), done func(error)) {
	r := c.r
	be := r.dir[backend]
	sess := r.sess[backend]
	r.s.Net.Call(r.Node, be.Node, what, 0, func(rep detsim.Reply) {
		next, err := f(be, sess)
		rep(next, err)
	}, func(v any, err error) {
		if err != nil {
			var bad *adapters.BackendError
			if errors.As(err, &bad) && (bad.Code == CodeTerminated || bad.Code == CodeLoginRefused) {
				delete(r.sess, backend)
			}
		} else if n, _ := v.(uint64); n != 0 {
			r.sess[backend] = n
		}
		done(err)
	})
}

// InDoubt lists the gids in the coordinator's log, for tests.
func (c *Coordinator) InDoubt() []string { return slices.Sorted(maps.Keys(c.wal)) }
