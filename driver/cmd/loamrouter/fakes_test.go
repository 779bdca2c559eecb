package main

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// world is an in-memory PgDog fleet and its shards: enough of PgDog's admin database for a
// cutover (pause, resume, reload, COPY_DATA, SHOW TASKS, slot lag, CUTOVER, STOP_TASK) and
// of Postgres's fence, recording what was done to it.
type world struct {
	mu     sync.Mutex
	paused map[string]bool
	gen    map[string]uint64 // instance → generation it reloaded
	fenced map[string]bool   // backend key → fenced
	fences int               // FenceWrites calls
	// drained is the backend keys whose slot drain ran, and whether they were fenced
	// then; a CUTOVER is refused without one, or with one that ran unfenced.
	drained map[string]bool
	tasks   map[int64]adapters.Task
	lag     []int64 // lags SlotLag returns in turn (the last one repeats)
	cutover int     // CUTOVER calls
	next    int64
	// failApply makes that many Apply calls of an instance fail.
	failApply map[string]int
	// calls is every call made to the fleet and its shards, in the order they reached it,
	// as "Op instance gen" (Apply) or "Op instance" (the rest).
	calls []string
}

// record notes a call; the caller holds mu.
func (w *world) record(op, who string, gen ...uint64) {
	c := op + " " + who
	for _, g := range gen {
		c += " " + strconv.FormatUint(g, 10)
	}
	w.calls = append(w.calls, c)
}

func newWorld() *world {
	return &world{paused: map[string]bool{}, gen: map[string]uint64{}, fenced: map[string]bool{}, drained: map[string]bool{}, tasks: map[int64]adapters.Task{}, failApply: map[string]int{},
		lag: []int64{9_000_000, 6_000_000, 3_000_000, 500}, next: 7}
}

type fakeRouter struct {
	id string
	w  *world
}

func (r fakeRouter) ID() string { return r.id }
func (r fakeRouter) Apply(ctx context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("Apply", r.id, gen)
	if r.w.failApply[r.id] > 0 {
		r.w.failApply[r.id]--
		return adapters.Applied{}, &adapters.RouterError{Instance: r.id, Op: "Apply", Code: "58000", Err: errors.New("reload failed")}
	}
	r.w.gen[r.id] = gen
	return adapters.Applied{Generation: gen}, nil
}
func (r fakeRouter) Pause(ctx context.Context, db string) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("Pause", r.id)
	r.w.paused[r.id] = true
	return nil
}
func (r fakeRouter) Resume(ctx context.Context, db string) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("Resume", r.id)
	r.w.paused[r.id] = false
	return nil
}
func (r fakeRouter) Observe(ctx context.Context) (adapters.Observed, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	return adapters.Observed{Version: "fake", Generation: r.w.gen[r.id], GenerationKnown: true}, nil
}

// CopyData, Tasks, SlotLag, Cutover and StopTask make fakeRouter an adapters.Resharder.
func (r fakeRouter) CopyData(ctx context.Context, source, destination, publication, slot string) (int64, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("CopyData", r.id)
	id := r.w.next
	r.w.next++
	// SHOW TASKS's types as PgDog words them (cutover.CopyOf, cutover.StreamOf).
	r.w.tasks[id] = adapters.Task{ID: id, Kind: "reshard " + source + " -> " + destination, Status: "running", InnerStatus: "replicating"}
	return id, nil
}
func (r fakeRouter) Tasks(ctx context.Context) ([]adapters.Task, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("Tasks", r.id)
	var out []adapters.Task
	for _, t := range r.w.tasks {
		out = append(out, t)
	}
	return out, nil
}
func (r fakeRouter) SlotLag(ctx context.Context, slot string, shards int) (int64, bool, error) {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("SlotLag", r.id)
	l := r.w.lag[0]
	if len(r.w.lag) > 1 {
		r.w.lag = r.w.lag[1:]
	}
	return l, true, nil
}
func (r fakeRouter) Cutover(ctx context.Context, task int64) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("Cutover", r.id)
	t, ok := r.w.tasks[task]
	if !ok {
		return errors.New("no such task")
	}
	if len(r.w.drained) == 0 || slices.Contains(slices.Collect(maps.Values(r.w.drained)), false) {
		return errors.New("CUTOVER before the shards it leaves drained while fenced")
	}
	r.w.cutover++
	t.Status = "finished"
	r.w.tasks[task] = t
	rev := r.w.next
	r.w.next++
	kind := t.Kind // the stream back of a reverse stream is named as that one is
	if pair, ok := strings.CutPrefix(kind, "reshard "); ok {
		kind = "replication " + pair + " (reverse)"
	}
	r.w.tasks[rev] = adapters.Task{ID: rev, Kind: kind, Status: "running", InnerStatus: "replicating"}
	r.w.paused[r.id] = false // CUTOVER clears the instance's holds
	return nil
}
func (r fakeRouter) StopTask(ctx context.Context, task int64) error {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	r.w.record("StopTask", r.id)
	if t, ok := r.w.tasks[task]; ok {
		t.Status = "cancelled"
		r.w.tasks[task] = t
	}
	return nil
}

type fakeBackend struct {
	key string
	w   *world
}

func (b fakeBackend) Status(ctx context.Context) (adapters.BackendStatus, error) {
	return adapters.BackendStatus{Role: adapters.RolePrimary, Position: "0/1"}, nil
}
func (b fakeBackend) FenceWrites(ctx context.Context, role string) error {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.w.record("FenceWrites", b.key)
	b.w.fenced[b.key] = true
	b.w.fences++
	return nil
}
func (b fakeBackend) AwaitSlotDrain(ctx context.Context, slot string) error {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.w.record("AwaitSlotDrain", b.key)
	b.w.drained[b.key] = b.w.fenced[b.key]
	return nil
}
func (b fakeBackend) UnfenceWrites(ctx context.Context, role string) error {
	b.w.mu.Lock()
	defer b.w.mu.Unlock()
	b.w.record("UnfenceWrites", b.key)
	b.w.fenced[b.key] = false
	return nil
}
func (b fakeBackend) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) { return nil, nil }
func (b fakeBackend) Checksum(ctx context.Context, table string, by adapters.ShardFn) (adapters.TableDigest, error) {
	return adapters.TableDigest{}, errors.New("not used")
}

// opener returns the world as every database's fleet.
func (w *world) opener(ids ...string) controller.Opener {
	return func(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
		f := controller.NewFleet()
		for _, id := range ids {
			r := fakeRouter{id: id, w: w}
			f.Routers[id], f.Resharders[id] = r, r
		}
		f.Dial = func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error) {
			return fakeBackend{key: b.Host + ":" + strconv.Itoa(int(b.Port)), w: w}, nil
		}
		return f, nil
	}
}
