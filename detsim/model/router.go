package model

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
)

// Directory finds backends by node name.
type Directory map[string]*Backend

// Load is one change of what an instance routes by, for the checkers.
type Load struct {
	T          int64
	Instance   string
	Generation uint64
	Why        string // "start", "reload", "cutover"
}

// Router is one PgDog instance as Loam sees it: the generation it loaded from the files,
// its routing table, paused databases that hold queries, pooled sessions to backends,
// background tasks (RESHARD's copy and replication, the reverse stream after CUTOVER) and,
// with 2PC on, a coordinator. A crash loses everything in memory; the instance restarts by
// reading the files, as PgDog re-reads only the files it was started with.
type Router struct {
	s     *detsim.Sim
	ID    string
	Node  detsim.NodeID
	Role  string // the application role its sessions log in as
	files *Files
	dir   Directory

	// GenerationKnown is whether Observe can tell the generation (PgDog usually cannot).
	GenerationKnown bool
	// Started is when the running process started (the in-doubt monitor's roster).
	Started int64
	// NoNodeID runs the instance without NODE_ID: each process draws its own 8 hex digit
	// instance id, so a restart looks like a new instance (and the old one gone).
	NoNodeID bool
	// StreamRate, when positive, is how many changes per second a task's stream carries at
	// most (a replication stream of finite throughput: apply on the destination, the
	// network between), and the copy reads the source as of its slot's creation at
	// COPY_DATA, as Postgres's exported snapshot does, so what is written during the copy
	// waits in the slot. Zero carries any backlog at once and copies the rows as they are
	// when the copy runs.
	StreamRate int64
	// CutoverTimeout is PgDog's cutover_timeout in ms (the action: abort): how long CUTOVER
	// waits for the stream to drain before it gives up and clears its holds. Zero is 30 s.
	CutoverTimeout int64
	// StaleLagSwap makes CUTOVER swap without waiting for its stream to have carried
	// everything, as PgDog 9918e963 can: its wait reads a lag the stream refreshes once a
	// second (publisher_impl.rs), so a stale 0 lets the swap go, and the swap ends the
	// stream with what it had not applied. Only the cutover's own drain (Cutover.Drain,
	// which the scenario's executor runs through SlotDrained before it sends CUTOVER) then
	// keeps acknowledged writes from being left behind.
	StaleLagSwap bool
	// FailAfterSwap is how many of the instance's next CUTOVERs fail after their swap (as
	// fault pgdog.cutover.fail_after_swap does), for worlds that need that path every run.
	FailAfterSwap int

	gen      uint64
	routes   map[string][]string
	twoPC    bool
	paused   map[string]bool
	held     []held
	sess     map[string]uint64
	tasks    []*Task
	nextTask int64
	coord    *Coordinator

	// Loads is every change of routing, Crashes every crash, and Dispatched, for the
	// checkers, every time each transaction left for a backend, in order: more than once
	// when the network delivered the client's request twice (a read is idempotent).
	Loads      []Load
	Crashes    []int64
	Dispatched map[int64][]Dispatch
}

// Dispatch is when (the simulator's event count) a transaction left an instance, and for
// which backend.
type Dispatch struct {
	Step    int
	Backend string
}

type held struct {
	db    string
	txn   Txn
	reply detsim.Reply
}

// NewRouter adds an instance and starts it (it reads the files).
func NewRouter(s *detsim.Sim, id, role string, files *Files, dir Directory) *Router {
	r := &Router{s: s, ID: id, Role: role, files: files, dir: dir, GenerationKnown: true}
	r.Node = s.Net.AddNode(id)
	r.coord = newCoordinator(r)
	r.start()
	return r
}

func (r *Router) start() {
	r.Started = r.s.Now()
	r.paused, r.held, r.sess, r.tasks = map[string]bool{}, nil, map[string]uint64{}, nil
	r.routes = map[string][]string{}
	if err := r.load("start"); err != nil {
		panic(fmt.Sprintf("model: %s cannot start: %v", r.ID, err)) // the files are rendered by the scenario
	}
}

func (r *Router) load(why string) error {
	gen, fs := r.files.ReadAs(r.ID)
	c, err := ParseConfig(fs)
	if err != nil {
		// PgDog keeps what it had and answers the admin command with an error (58000).
		return &adapters.RouterError{Instance: r.ID, Op: "Apply", Code: "58000", Err: err}
	}
	if why == "reload" && r.s.Fault("pgdog.reload.after_parse") {
		return &adapters.RouterError{Instance: r.ID, Op: "Apply", Code: "58000",
			Err: fmt.Errorf("reload of generation %d failed after parsing (injected); generation %d stays loaded", gen, r.gen)}
	}
	r.gen, r.routes, r.twoPC = c.Generation, c.Databases, c.TwoPC
	r.Loads = append(r.Loads, Load{T: r.s.Now(), Instance: r.ID, Generation: r.gen, Why: why})
	return nil
}

// ProcessID is the instance id the running process writes into its gids (PgDog's SHOW
// INSTANCE_ID): NODE_ID, or without it 8 hex digits drawn per process (here derived from
// the instance and its incarnation, so runs stay reproducible).
func (r *Router) ProcessID() string {
	if !r.NoNodeID {
		return r.ID
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", r.ID, r.s.Net.Incarnation(r.Node))
	return fmt.Sprintf("%08x", h.Sum32())
}

// Generation is the generation the instance loaded last.
func (r *Router) Generation() uint64 { return r.gen }

// Routes returns the backends database routes to now (nil when unknown).
func (r *Router) Routes(db string) []string { return slices.Clone(r.routes[db]) }

// Up reports whether the instance is running.
func (r *Router) Up() bool { return r.s.Net.Up(r.Node) }

// Crash kills the instance: pauses, held queries, sessions, tasks and the coordinator's
// memory are lost; what a held query's client sees is the network's reset.
func (r *Router) Crash() {
	r.Crashes = append(r.Crashes, r.s.Now())
	r.s.Net.Crash(r.Node)
	r.paused, r.held, r.sess, r.tasks = nil, nil, nil, nil
	r.coord.crash()
}

// Boot restarts a crashed instance: it reads the files as they are now.
func (r *Router) Boot() {
	if r.Up() {
		return
	}
	r.s.Net.Restart(r.Node)
	r.start()
	r.coord.recover()
}

// Reload is RELOAD: re-read the files and route by them. Fault pgdog.reload.after_parse
// fails it after parsing, keeping the old generation.
func (r *Router) Reload() (adapters.Applied, error) {
	if err := r.load("reload"); err != nil {
		return adapters.Applied{}, err
	}
	return adapters.Applied{Generation: r.gen}, nil
}

// Pause is PAUSE <db>: new queries for db are held until Resume.
func (r *Router) Pause(db string) error {
	r.paused[db] = true
	return nil
}

// Resume is RESUME <db>: held queries go out in the order they arrived.
func (r *Router) Resume(db string) error {
	if !r.paused[db] {
		return nil
	}
	delete(r.paused, db)
	var keep []held
	var release []held
	for _, h := range r.held {
		if h.db == db {
			release = append(release, h)
		} else {
			keep = append(keep, h)
		}
	}
	r.held = keep
	for _, h := range release {
		r.dispatch(h.db, h.txn, h.reply)
	}
	return nil
}

// Paused reports whether db is paused.
func (r *Router) Paused(db string) bool { return r.paused[db] }

// Observe is what the instance shows of itself (SHOW CONFIG, SHOW TASKS, ...).
func (r *Router) Observe() adapters.Observed {
	o := adapters.Observed{Version: "pgdog-model", Generation: r.gen, GenerationKnown: r.GenerationKnown}
	o.Paused = slices.Sorted(maps.Keys(r.paused))
	for _, t := range r.tasks {
		o.Tasks = append(o.Tasks, adapters.Task{ID: t.ID, Kind: t.Kind, Status: t.Status, InnerStatus: t.Inner,
			Elapsed: time.Duration(r.s.Now()-t.started) * time.Millisecond})
	}
	return o
}

// Query runs a single-shard transaction for a client: held while db is paused, then routed
// by the first key under the current routing table, run in the instance's session to that
// backend. The answer is the reads, or the backend's error (28000 after the fence, 57P01 when
// the fence ended the session), or an indeterminate error when the backend did not answer.
func (r *Router) Query(db string, txn Txn, reply detsim.Reply) {
	if r.paused[db] {
		r.held = append(r.held, held{db, txn, reply})
		return
	}
	r.dispatch(db, txn, reply)
}

func (r *Router) dispatch(db string, txn Txn, reply detsim.Reply) {
	shards := r.routes[db]
	if len(shards) == 0 {
		reply(nil, &adapters.RouterError{Instance: r.ID, Op: "Query", Code: "3D000", Err: fmt.Errorf("database %q does not exist", db)})
		return
	}
	name := shards[Route(txn.Ops[0].Key, len(shards))]
	b := r.dir[name]
	sess := r.sess[name]
	if r.Dispatched == nil {
		r.Dispatched = map[int64][]Dispatch{}
	}
	r.Dispatched[txn.ID] = append(r.Dispatched[txn.ID], Dispatch{Step: r.s.Steps(), Backend: name})
	// A query on a new session is sent only once the login's round trip has succeeded, so
	// one the instance gave up on (its connect timeout) never runs later: a startup message
	// that arrives late finds its client gone, and nothing was queued behind it. A query on
	// an open session can still arrive late; the fence ends such sessions first.
	flags := detsim.CallFlags(0)
	if sess == 0 {
		flags = detsim.Settled
	}
	r.s.Net.Call(r.Node, b.Node, "exec "+strconv.FormatInt(txn.ID, 10), flags, func(rep detsim.Reply) {
		reads, next, err := b.Exec(r.Role, sess, r.ID, txn)
		rep(execReply{reads, next}, err)
	}, func(v any, err error) {
		if err != nil {
			delete(r.sess, name)
			reply(nil, err)
			return
		}
		x := v.(execReply)
		r.sess[name] = x.sess
		reply(x.reads, nil)
	})
}

type execReply struct {
	reads [][]int64
	sess  uint64
}
