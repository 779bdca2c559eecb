package driver

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/machine"
)

// Config is one run of one machine.
type Config[In any] struct {
	// ID names this machine among those of its kind (a database: "<ns>/<db>"); its
	// snapshot is the blob "machine/<kind>/<ID>".
	ID string
	// Store keeps the snapshot, saved after every step, so a killed driver resumes. Nil
	// keeps nothing (tests, one-shot runs).
	Store adapters.BlobStore
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Trace receives the machine's SpecEvents. Nil: the file named by LOAM_SPEC_TRACE when
	// it is set, else nowhere.
	Trace machine.TraceSink
	// Inputs brings inputs from outside (a ShardMapStore watch, an operator). With Inputs
	// set Run ends only with ctx or when Inputs is closed and the machine is idle.
	Inputs <-chan In
	// CallTimeout bounds every Execute call (default one minute). Machines set their own
	// deadlines and give up on a silent peer; this only ends the hung call itself, so a run
	// does not wait for ever on an adapter that never returns. It is real time whatever
	// Clock says.
	CallTimeout time.Duration
	// Clock is the time the machine goes by: ctx.Now of every step, and the clock its
	// timers fire on. Nil is the real clock; a *FakeClock lets a test move it (see
	// ExampleFakeClock).
	Clock Clock
	// Drain, when closed, asks for a graceful stop (a daemon's SIGTERM): no further command
	// is started and no timer fires, the commands already executing finish and their
	// replies are fed and saved, then Run returns ErrDrained. What the last steps issued is
	// in the saved snapshot, unexecuted, and the next driver re-issues it (Restarted): the
	// stop leaves no step half-recorded.
	Drain <-chan struct{}
	// Timeline, when set, records where the run's time goes: each step's On and snapshot
	// save, each command's execution and the wait for its reply to be fed, each timer (see
	// Timeline). Nil records nothing.
	Timeline *Timeline
}

// DefaultCallTimeout is Config.CallTimeout's default.
const DefaultCallTimeout = time.Minute

// SnapshotKey is the blob key of a machine's snapshot.
func SnapshotKey(kind, id string) string { return "machine/" + kind + "/" + id }

// ErrDrained is returned by Run after a graceful stop asked for through Config.Drain.
var ErrDrained = errors.New("driver: drained: every started command finished and was saved")

// ErrRestore is wrapped when a persisted snapshot cannot be decoded or restored: the run
// stops rather than start the machine over and repeat what it had done.
var ErrRestore = errors.New("driver: cannot restore the machine's snapshot")

// Run drives one machine until it is idle — no command in flight, no timer pending, no
// Inputs channel open — or ctx ends (then it returns ctx's error). If the store holds a
// snapshot for the machine, Run restores it and feeds kind.Restarted first; then it feeds
// start, in order.
//
// Each step: the inputs that are ready are fed to On in arrival order, with ctx.Now from
// cfg.Clock (the real clock by default) and Rand from a ChaCha8 generator seeded from
// crypto/rand; the snapshot is saved; only then are the commands executed — timer commands
// as timers on cfg.Clock, the others
// through kind.Exec, concurrently unless kind.Ordered says otherwise. Every reply becomes
// an input of a later step. Saving before executing means a killed driver loses no
// command: the next one re-issues whatever had no reply yet, under the same step id.
//
// An executor with a Flush method (Audited) is flushed before Run returns.
//
// A save that fails stops the run with the error: executing commands whose issuing state
// is not durable could repeat them after a restart. A save that conflicts means another
// driver runs the same machine; that error wraps adapters.ErrConflict.
func Run[In, Cmd, Snap any](ctx context.Context, kind Kind[In, Cmd, Snap], cfg Config[In], start ...In) (err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("machine", kind.Name, "id", cfg.ID)
	sink := cfg.Trace
	if sink == nil {
		tf, err := TraceFromEnv(logger)
		if err != nil {
			return err
		}
		if tf != nil {
			defer tf.Close()
			sink = tf
		} else {
			sink = machine.Discard
		}
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return fmt.Errorf("driver: seeding the random generator: %w", err)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	r := &run[In, Cmd, Snap]{
		kind: kind, cfg: cfg, log: logger, key: SnapshotKey(kind.Name, cfg.ID),
		mctx:    &machine.Ctx{Rand: rand.New(rand.NewChaCha8(seed)), Trace: sink},
		results: make(chan result[In], 64),
		fired:   make(chan firing, 16),
		timers:  map[string]*timer{},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		for _, t := range r.timers {
			t.stop()
		}
		r.wg.Wait()
		if f, ok := any(kind.Exec).(interface{ Flush() }); ok {
			f.Flush() // an Audited executor's result entries
		}
	}()
	r.ordered = newFIFO[Cmd]()
	r.wg.Add(1)
	go r.orderedWorker(ctx)

	queue, err := r.load(ctx)
	if err != nil {
		return err
	}
	queue = append(queue, start...)
	inputs := cfg.Inputs
	drain := cfg.Drain
	for {
		if len(queue) > 0 {
			if err := r.step(ctx, queue); err != nil {
				return err
			}
			queue = queue[:0]
		}
		if r.draining {
			if r.inflight == 0 {
				logger.Info("drained: every started command finished and its reply is saved")
				return ErrDrained
			}
		} else if r.inflight == 0 && len(r.timers) == 0 && inputs == nil {
			if err := ctx.Err(); err != nil {
				// The commands ended because the run was stopped, not because they were done.
				logger.Info("stopped", "cause", context.Cause(ctx))
				return err
			}
			logger.Debug("idle: nothing in flight, no timer pending")
			return nil
		}
		select {
		case <-ctx.Done():
			logger.Info("stopped", "cause", context.Cause(ctx), "inflight", r.inflight, "timers", len(r.timers))
			return ctx.Err()
		case <-drain:
			drain, inputs = nil, nil
			r.draining = true
			for id, t := range r.timers {
				t.stop()
				delete(r.timers, id)
			}
			logger.Info("draining: starting nothing new, waiting for the commands in flight", "inflight", r.inflight)
		case res := <-r.results:
			queue = r.collect(queue, res)
		case f := <-r.fired:
			queue = r.fire(queue, f)
		case in, ok := <-inputs:
			if !ok {
				inputs = nil
				continue
			}
			queue = append(queue, in)
		}
		// Take everything else that is ready too: one step, one save, for a burst of replies.
		for more := true; more; {
			select {
			case res := <-r.results:
				queue = r.collect(queue, res)
			case f := <-r.fired:
				queue = r.fire(queue, f)
			default:
				more = false
			}
		}
	}
}

// run is the state of one Run.
type run[In, Cmd, Snap any] struct {
	kind     Kind[In, Cmd, Snap]
	cfg      Config[In]
	log      *slog.Logger
	key      string
	m        Machine[In, Cmd, Snap]
	version  uint64 // of the snapshot blob
	mctx     *machine.Ctx
	results  chan result[In]
	fired    chan firing
	timers   map[string]*timer
	seq      uint64
	inflight int
	ordered  *fifo[Cmd]
	wg       sync.WaitGroup
	// draining: Config.Drain was closed; commands are saved but not started.
	draining bool
	// feeds are the SpanFeeds of the replies collected for the next step.
	feeds []Span
	// fedResults are the result entries of the replies collected for the next step, which
	// its snapshot's write records (Audited).
	fedResults []*resultWrite
}

type result[In any] struct {
	in    In
	reply bool
	feed  Span         // the reply's SpanFeed, its End set when a step feeds it
	audit *resultWrite // the reply's result entry, for the step that feeds it to write
}

type timer struct {
	stop func() bool
	seq  uint64
	set  time.Time
}

type firing struct {
	id  string
	seq uint64
}

// load restores the machine from the store, or makes a new one.
func (r *run[In, Cmd, Snap]) load(ctx context.Context) ([]In, error) {
	if r.cfg.Store == nil {
		r.m = r.kind.New()
		return nil, nil
	}
	b, err := r.cfg.Store.GetBlob(ctx, r.key)
	if errors.Is(err, adapters.ErrNotFound) {
		r.m = r.kind.New()
		r.log.Info("starting a new machine")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("driver: reading the snapshot %s: %w", r.key, err)
	}
	var s Snap
	if err := json.Unmarshal(b.Data, &s); err != nil {
		return nil, fmt.Errorf("%w %s (version %d): %w", ErrRestore, r.key, b.Version, err)
	}
	if r.m, err = r.kind.Restore(s); err != nil {
		return nil, fmt.Errorf("%w %s (version %d): %w", ErrRestore, r.key, b.Version, err)
	}
	r.version = b.Version
	r.log.Info("restored from the last snapshot; re-issuing what was in flight", "version", b.Version)
	return []In{r.kind.Restarted}, nil
}

// step feeds the inputs, saves the snapshot, then executes the commands.
func (r *run[In, Cmd, Snap]) step(ctx context.Context, inputs []In) error {
	tl := r.cfg.Timeline
	var t0 time.Time
	if tl != nil {
		t0 = time.Now()
		for _, f := range r.feeds {
			f.End = t0
			tl.Add(f)
		}
		r.feeds = r.feeds[:0]
	}
	var cmds []Cmd
	for _, in := range inputs {
		r.mctx.Now = r.cfg.Clock.Now().UnixMilli()
		cmds = append(cmds, r.m.On(r.mctx, in)...)
	}
	if tl != nil {
		t1 := time.Now()
		tl.Add(Span{Kind: SpanStep, N: len(inputs), Start: t0, End: t1})
		t0 = t1
	}
	var sw stepWrite
	audit := false
	if sa, ok := any(r.kind.Exec).(stepAuditor[Cmd]); ok {
		// The step's exec entries, in one write with its snapshot, before any of its
		// commands starts, and the result entries of the replies it fed (Audited). A
		// draining run starts nothing: its commands get no exec entry.
		var execs []Cmd
		for _, c := range cmds {
			if !isTimer(c) && !r.draining {
				execs = append(execs, c)
			}
		}
		sw, audit = sa.prepareStep(execs, r.fedResults)
	}
	r.fedResults = r.fedResults[:0]
	if err := r.saveStep(ctx, sw, audit, len(cmds), t0); err != nil {
		return err
	}
	if r.draining {
		if len(cmds) > 0 {
			r.log.Debug("draining: commands saved for the next driver, not started", "commands", len(cmds))
		}
		return nil
	}
	for _, c := range cmds {
		r.dispatch(ctx, c)
	}
	return nil
}

// saveStep saves the snapshot and, with audit, writes the step's exec entries sw: in one
// transaction when both go to one store that batches (adapters.BlobBatcher: one fsync on
// bbolt instead of two in series), else both at once. Either way both are durable when it
// returns, so before any command of the step starts; a save that fails stops the run (with
// the two at once, the log may then hold exec entries of commands never started, as after a
// crash between an entry and its command). n commands follow; t0 is when the save began.
func (r *run[In, Cmd, Snap]) saveStep(ctx context.Context, sw stepWrite, audit bool, n int, t0 time.Time) error {
	span := func(what string) {
		if r.cfg.Timeline != nil {
			r.cfg.Timeline.Add(Span{Kind: SpanSave, What: what, N: n, Start: t0, End: time.Now()})
		}
	}
	if r.cfg.Store == nil {
		if audit {
			sw.done(sw.write(ctx))
		}
		return nil
	}
	data, err := json.Marshal(r.m.Snapshot())
	if err != nil {
		err = fmt.Errorf("driver: encoding the snapshot of %s: %w", r.key, err)
		if audit {
			sw.done(err)
		}
		return err
	}
	if audit && sameStore(r.cfg.Store, sw.store) {
		puts := append([]adapters.BlobPut{{Key: r.key, Expect: r.version, Data: data}}, sw.puts...)
		vs, err := adapters.PutBlobs(ctx, r.cfg.Store, puts)
		if !errors.Is(err, errors.ErrUnsupported) {
			sw.done(err)
			if err != nil {
				return r.saveError(err)
			}
			r.version = vs[0]
			span("snapshot and audit entries")
			return nil
		}
	}
	// Two stores (etcd's fenced view, the store server): the snapshot first, then the step's
	// exec and result entries, as before the batch. Written at once, an entry could land for a
	// step whose snapshot a SIGKILL stopped, and the audit would show the standby executing
	// again a step whose result it had recorded (TestEtcdLeaderKilledMidCutoverProcesses saw
	// it).
	v, err := r.cfg.Store.PutBlob(ctx, r.key, r.version, data)
	if err != nil {
		if audit {
			sw.done(r.saveError(err))
		}
		return r.saveError(err)
	}
	r.version = v
	span("snapshot")
	if audit {
		sw.done(sw.write(ctx))
	}
	return nil
}

// saveError is the error of a snapshot save that failed.
func (r *run[In, Cmd, Snap]) saveError(err error) error {
	if errors.Is(err, adapters.ErrConflict) {
		return fmt.Errorf("driver: another driver saved %s (stop one of them): %w", r.key, err)
	}
	return fmt.Errorf("driver: saving the snapshot %s; stopping before executing its commands: %w", r.key, err)
}

// sameStore reports whether a and b write to one store: the same store, or a GuardedStore
// over the other (a controller saves its snapshots through its guarded store and, on a
// lease kept by compare-and-set, writes its audit log straight to the store).
func sameStore(a, b adapters.BlobStore) bool {
	base := func(s adapters.BlobStore) adapters.BlobStore {
		if g, ok := s.(GuardedStore); ok {
			return g.Store
		}
		return s
	}
	a, b = base(a), base(b)
	t := reflect.TypeOf(a)
	return t != nil && t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// isTimer reports whether c sets or cancels a timer (Run keeps those itself).
func isTimer(c any) bool {
	switch c.(type) {
	case interface{ Timer() machine.SetTimer }, interface{ CancelledTimer() machine.CancelTimer }:
		return true
	}
	return false
}

func (r *run[In, Cmd, Snap]) dispatch(ctx context.Context, c Cmd) {
	switch t := any(c).(type) {
	case interface{ Timer() machine.SetTimer }:
		r.setTimer(ctx, t.Timer())
		return
	case interface{ CancelledTimer() machine.CancelTimer }:
		if old, ok := r.timers[t.CancelledTimer().ID]; ok {
			old.stop()
			delete(r.timers, t.CancelledTimer().ID)
		}
		return
	}
	r.log.Debug("execute", "cmd", c)
	r.inflight++
	if r.kind.Ordered != nil && r.kind.Ordered(c) {
		r.ordered.push(c)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		res := r.execute(ctx, c)
		select {
		case r.results <- res:
		case <-ctx.Done():
		}
	}()
}

func (r *run[In, Cmd, Snap]) orderedWorker(ctx context.Context) {
	defer r.wg.Done()
	for {
		c, ok := r.ordered.pop(ctx)
		if !ok {
			return
		}
		res := r.execute(ctx, c)
		select {
		case r.results <- res:
		case <-ctx.Done():
			return
		}
	}
}

func (r *run[In, Cmd, Snap]) execute(ctx context.Context, c Cmd) result[In] {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	exec := func() result[In] {
		if ra, ok := any(r.kind.Exec).(resultAuditor[In, Cmd]); ok {
			in, reply, rw := ra.executeDeferred(ctx, c)
			return result[In]{in: in, reply: reply, audit: rw}
		}
		in, reply := r.kind.Exec.Execute(ctx, c)
		return result[In]{in: in, reply: reply}
	}
	if r.cfg.Timeline == nil {
		return exec()
	}
	s := Span{Kind: SpanExec, What: describe(c), Target: target(c), Start: time.Now()}
	s.Step, _ = stepOf(c)
	res := exec()
	s.End = time.Now()
	s.Result = "ok"
	if res.reply {
		s.Result = resultOf(res.in)
	}
	r.cfg.Timeline.Add(s)
	res.feed = Span{Kind: SpanFeed, Step: s.Step, What: s.What, Target: s.Target, Start: s.End}
	return res
}

func (r *run[In, Cmd, Snap]) collect(queue []In, res result[In]) []In {
	r.inflight--
	if res.audit != nil {
		r.fedResults = append(r.fedResults, res.audit)
	}
	if res.reply {
		queue = append(queue, res.in)
		if r.cfg.Timeline != nil {
			r.feeds = append(r.feeds, res.feed)
		}
	}
	return queue
}

func (r *run[In, Cmd, Snap]) setTimer(ctx context.Context, st machine.SetTimer) {
	if old, ok := r.timers[st.ID]; ok {
		old.stop()
	}
	r.seq++
	f := firing{id: st.ID, seq: r.seq}
	r.timers[st.ID] = &timer{seq: f.seq, set: time.Now(), stop: r.cfg.Clock.At(time.UnixMilli(st.At), func() {
		select {
		case r.fired <- f:
		case <-ctx.Done():
		}
	})}
}

// fire feeds a timer that is still the pending one for its id (a replaced or cancelled
// timer may fire anyway; it is dropped here).
func (r *run[In, Cmd, Snap]) fire(queue []In, f firing) []In {
	if r.draining {
		return queue
	}
	t, ok := r.timers[f.id]
	if !ok || t.seq != f.seq {
		return queue
	}
	delete(r.timers, f.id)
	r.cfg.Timeline.Add(Span{Kind: SpanTimer, Step: f.id, Start: t.set, End: time.Now()})
	return append(queue, r.kind.Timer(machine.TimerFired{ID: f.id}))
}

// fifo is an unbounded queue for the ordered worker, so issuing never blocks the loop.
type fifo[T any] struct {
	mu   sync.Mutex
	q    []T
	wake chan struct{}
}

func newFIFO[T any]() *fifo[T] { return &fifo[T]{wake: make(chan struct{}, 1)} }

func (f *fifo[T]) push(v T) {
	f.mu.Lock()
	f.q = append(f.q, v)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *fifo[T]) pop(ctx context.Context) (T, bool) {
	for {
		f.mu.Lock()
		if len(f.q) > 0 {
			v := f.q[0]
			f.q = f.q[1:]
			f.mu.Unlock()
			return v, true
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			var zero T
			return zero, false
		}
	}
}
