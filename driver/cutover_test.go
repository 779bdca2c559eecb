package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// fleet is an in-memory PgDog fleet and its shards: enough of PgDog's admin database for a
// cutover (PAUSE, RESUME, RELOAD of rendered files, COPY_DATA, SHOW TASKS, SHOW
// REPLICATION_SLOTS, CUTOVER, STOP_TASK) and of Postgres's fence.
type fleet struct {
	mu       sync.Mutex
	paused   map[string]bool
	routes   map[string]string // instance -> layout it routes to ("s" old, "n" new)
	fenced   map[string]bool   // backend key -> fenced
	tasks    map[int64]string  // id -> PgDog status/inner, as SHOW TASKS shows them
	kinds    map[int64]string  // id -> SHOW TASKS's type column
	next     int64
	cutovers int
	asked    int    // CUTOVERs received, taken or refused
	onCut    func() // called after a CUTOVER took effect
	// layouts are the backend keys of each layout's shards ("s" old, "n" new); drained
	// the shards whose drain ran while they were fenced, since the last CUTOVER. A CUTOVER
	// is refused unless every shard of the layout its instance leaves is drained: PgDog's
	// own wait can swap with acknowledged writes still in the stream.
	layouts  map[string][]string
	drained  map[string]bool
	drainErr map[string]error // a shard's drain fails with it
}

func newFleet(ids []string) *fleet {
	f := &fleet{paused: map[string]bool{}, routes: map[string]string{}, fenced: map[string]bool{}, tasks: map[int64]string{}, kinds: map[int64]string{}, next: 7,
		layouts: map[string][]string{}, drained: map[string]bool{}, drainErr: map[string]error{}}
	for _, id := range ids {
		f.routes[id] = "s"
	}
	return f
}

type pgdog struct {
	id string
	f  *fleet
}

func (p pgdog) ID() string { return p.id }

func (p pgdog) Apply(ctx context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	file, ok := files.Get("pgdog.toml")
	if !ok {
		return adapters.Applied{}, errors.New("no pgdog.toml")
	}
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.routes[p.id] = strings.TrimPrefix(string(file.Data), "layout=")[:1]
	return adapters.Applied{Generation: gen}, nil
}

func (p pgdog) Pause(ctx context.Context, db string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.paused[p.id] = true
	return nil
}

func (p pgdog) Resume(ctx context.Context, db string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.paused[p.id] = false
	return nil
}

func (p pgdog) Observe(ctx context.Context) (adapters.Observed, error) {
	return adapters.Observed{}, nil
}

func (p pgdog) CopyData(ctx context.Context, src, dst, pub, slot string) (int64, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	id := p.f.next
	p.f.next++
	p.f.tasks[id] = "running/replicating"
	p.f.kinds[id] = "reshard " + src + " -> " + dst
	return id, nil
}

func (p pgdog) Tasks(ctx context.Context) ([]adapters.Task, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	var out []adapters.Task
	for id, st := range p.f.tasks {
		s, inner, _ := strings.Cut(st, "/")
		out = append(out, adapters.Task{ID: id, Kind: p.f.kinds[id], Status: s, InnerStatus: inner})
	}
	return out, nil
}

// SlotLag knows the lag only when asked for one slot per shard of the layout the copy reads
// (PgDog lists <slot>_<i> per source shard, and no more).
func (p pgdog) SlotLag(ctx context.Context, slot string, shards int) (int64, bool, error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if shards != len(p.f.layouts["s"]) {
		return 0, false, nil
	}
	return 10, true, nil
}

func (p pgdog) Cutover(ctx context.Context, task int64) error {
	p.f.mu.Lock()
	p.f.asked++
	if p.f.tasks[task] != "running/replicating" {
		p.f.mu.Unlock()
		return errors.New("task is not a replication task")
	}
	for _, k := range p.f.layouts[p.f.routes[p.id]] {
		if !p.f.drained[k] {
			p.f.mu.Unlock()
			return fmt.Errorf("CUTOVER before shard %s was drained while fenced: the stream may still hold acknowledged writes", k)
		}
	}
	clear(p.f.drained)
	p.f.cutovers++
	p.f.tasks[task] = "finished/"
	p.f.tasks[p.f.next] = "running/replicating"
	p.f.next++
	p.f.routes[p.id] = "n"
	p.f.paused[p.id] = false // CUTOVER clears the instance's holds
	on := p.f.onCut
	p.f.mu.Unlock()
	if on != nil {
		on()
	}
	return nil
}

func (p pgdog) StopTask(ctx context.Context, task int64) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if _, ok := p.f.tasks[task]; ok {
		p.f.tasks[task] = "cancelled/"
	}
	return nil
}

type shard struct {
	key string
	f   *fleet
}

func (s shard) FenceWrites(ctx context.Context, role string) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.fenced[s.key] = true
	return nil
}

// AwaitSlotDrain counts as a drain only on a fenced shard: before the fence the
// application can still write behind the position the drain waited for.
func (s shard) AwaitSlotDrain(ctx context.Context, slot string) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if err := s.f.drainErr[s.key]; err != nil {
		return err
	}
	if slot == "" {
		return errors.New("no slot")
	}
	s.f.drained[s.key] = s.f.fenced[s.key]
	return nil
}

func (s shard) UnfenceWrites(ctx context.Context, role string) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.fenced[s.key] = false
	return nil
}

func (s shard) Status(context.Context) (adapters.BackendStatus, error) {
	return adapters.BackendStatus{}, errors.New("not used")
}
func (s shard) Prepared(context.Context) ([]adapters.PreparedXact, error) {
	return nil, errors.New("not used")
}
func (s shard) Checksum(context.Context, string, adapters.ShardFn) (adapters.TableDigest, error) {
	return adapters.TableDigest{}, errors.New("not used")
}

// renderLayout stands in for kernel/render: the file names the first shard of the layout.
func renderLayout(r *shardmap.Record) (render.Files, error) {
	return render.NewFiles(render.File{Name: "pgdog.toml", Data: []byte("layout=" + r.Shards[0].Name)})
}

// reshardRecord is "app" at generation 4, resharding from s0,s1 to n0..n3.
func reshardRecord() *shardmap.Record {
	be := func(host string) shardmap.Backend { return shardmap.Backend{Host: host, Port: 5432, Database: "app"} }
	key := shardmap.Key{Column: "id", Type: shardmap.Bigint}
	r := shardmap.NewPgHash("app", key, be("10.0.1.1"), be("10.0.1.2"))
	r.Generation = 4
	t := shardmap.NewPgHash("app", key, be("10.0.2.1"), be("10.0.2.2"), be("10.0.2.3"), be("10.0.2.4")).Layout
	for i := range t.Shards {
		t.Shards[i].Name = fmt.Sprintf("n%d", i)
	}
	r.Target = &t
	r.State = shardmap.State{Phase: shardmap.Resharding, To: 5}
	return r
}

type cutoverSetup struct {
	fleet *fleet
	store *memstore.Store
	db    adapters.DBRef
	exec  *driver.CutoverExecutor
	start cutover.Start
	done  chan cutover.Done
}

func newCutoverSetup(t testing.TB) *cutoverSetup {
	ids := []string{"pgdog-1", "pgdog-2", "pgdog-3"}
	f := newFleet(ids)
	s := &cutoverSetup{fleet: f, store: memstore.New(), db: adapters.DBRef{Namespace: "ns", Database: "app"}, done: make(chan cutover.Done, 1)}
	rec := reshardRecord()
	v, err := s.store.CAS(context.Background(), s.db, 0, rec)
	require.NoError(t, err)
	rec.Version = v
	insts, reshards, backends := map[string]adapters.RouterInstance{}, map[string]adapters.Resharder{}, map[string]adapters.ShardBackend{}
	for _, id := range ids {
		insts[id], reshards[id] = pgdog{id, f}, pgdog{id, f}
	}
	for _, l := range []shardmap.Layout{rec.Layout, *rec.Target} {
		for _, sh := range l.Shards {
			k := driver.BackendKey(sh.Backend)
			backends[k] = shard{k, f}
			f.layouts[sh.Name[:1]] = append(f.layouts[sh.Name[:1]], k)
		}
	}
	s.exec = &driver.CutoverExecutor{DB: s.db, Store: s.store, Target: &fakeTarget{}, Render: renderLayout,
		Instance: driver.Lookup(insts), Resharder: driver.Lookup(reshards), Backend: driver.Lookup(backends),
		OnDone: func(d cutover.Done) { s.done <- d }, Logger: quiet}
	s.start = cutover.Start{Record: rec, Plan: cutover.Plan{Designated: "pgdog-1", Instances: ids, Role: "app", Publication: "app_pub",
		Options: cutover.Options{PollEvery: 5, RetryAfter: 5, Grace: 5, FinalizeAfter: 5}}}
	return s
}

func (s *cutoverSetup) run(ctx context.Context) error {
	return driver.Run(ctx, driver.Cutover(s.exec),
		driver.Config[cutover.Input]{ID: "ns/app", Store: s.store, Logger: quiet, Trace: machine.Discard}, cutover.Input(s.start))
}

// TestRunCutover: a cutover through the driver and its executor, on fakes of PgDog and
// Postgres, ends finalized: the new layout stored and serving, every instance routing to the
// new shards and resumed, the reverse stream stopped, the old shards' fence cleared.
func TestRunCutover(t *testing.T) {
	s := newCutoverSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx))
	d := <-s.done
	require.Equal(t, cutover.Finalized, d.Outcome, d.Reason)
	rec, err := s.store.Read(ctx, s.db)
	require.NoError(t, err)
	// Routed by generation 5; stored at 6 without the reshard destination, for ConfigPush.
	require.Equal(t, uint64(6), rec.Generation)
	require.Equal(t, uint64(6), d.Generation)
	require.Equal(t, shardmap.Serving, rec.State.Phase)
	require.Nil(t, rec.Target)
	require.Equal(t, "n0", rec.Shards[0].Name)
	f := s.fleet
	require.Equal(t, map[string]string{"pgdog-1": "n", "pgdog-2": "n", "pgdog-3": "n"}, f.routes)
	require.Equal(t, map[string]bool{"pgdog-1": false, "pgdog-2": false, "pgdog-3": false}, f.paused)
	for k, fenced := range f.fenced {
		require.False(t, fenced, "%s still fenced", k)
	}
	require.Equal(t, 1, f.cutovers)
	require.Equal(t, "cancelled/", f.tasks[8], "the reverse stream is stopped")
}

// TestRunCutoverKilledAfterCutover: the driver dies right after CUTOVER took effect on the
// designated instance, before its answer was fed back. The next driver restores the
// snapshot, asks the instance what happened instead of sending CUTOVER again, and
// finishes the cutover.
func TestRunCutoverKilledAfterCutover(t *testing.T) {
	s := newCutoverSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, kill := context.WithCancel(ctx)
	s.fleet.onCut = kill
	require.ErrorIs(t, s.run(first), context.Canceled)
	s.fleet.onCut = nil
	require.Equal(t, 1, s.fleet.cutovers)
	require.True(t, s.fleet.fenced[driver.BackendKey(s.start.Record.Shards[0].Backend)], "the old shards are fenced while the cutover is unfinished")

	require.NoError(t, s.run(ctx))
	d := <-s.done
	require.Equal(t, cutover.Finalized, d.Outcome, d.Reason)
	require.Equal(t, 1, s.fleet.cutovers, "CUTOVER is never sent twice")
	rec, err := s.store.Read(ctx, s.db)
	require.NoError(t, err)
	require.Equal(t, uint64(6), rec.Generation)
	require.Equal(t, "n0", rec.Shards[0].Name)
}

// TestCutoverExecutorAnswers: what the executor feeds back for the cases the machine
// branches on.
func TestCutoverExecutorAnswers(t *testing.T) {
	s := newCutoverSetup(t)
	ctx := context.Background()
	e := s.exec

	// A lost compare-and-set carries the record that won.
	in, reply := e.Execute(ctx, cutover.WriteRecord{Step: "w", Expect: 99, Record: s.start.Record})
	require.True(t, reply)
	rw := in.(cutover.RecordWritten)
	require.ErrorIs(t, rw.Err, adapters.ErrConflict)
	require.NotNil(t, rw.Conflict)
	require.Equal(t, uint64(1), rw.Conflict.Version)

	// A task SHOW TASKS does not list is NotListed; PgDog's wording is classified.
	in, _ = e.Execute(ctx, cutover.PollCopy{Step: "p", Instance: "pgdog-1", Task: 42, Slot: "loam_app_4", Shards: 2})
	require.Equal(t, cutover.TaskNotListed, in.(cutover.CopyPolled).Task.State)
	in, _ = e.Execute(ctx, cutover.CopyData{Step: "c", Instance: "pgdog-1", Source: "app", Destination: "app__reshard_4", Publication: "app_pub", Slot: "loam_app_4"})
	task := in.(cutover.CopyStarted).Task
	in, _ = e.Execute(ctx, cutover.PollCopy{Step: "p", Instance: "pgdog-1", Task: task, Slot: "loam_app_4", Shards: 2})
	require.Equal(t, cutover.CopyPolled{Step: "p", Task: cutover.Task{ID: task, State: cutover.TaskReplicating, Detail: "running (replicating)",
		Kind: "reshard app -> app__reshard_4"}, LagBytes: 10}, in)
	// A lag the resharder does not know (a source shard's slot missing) is -1, not 0.
	in, _ = e.Execute(ctx, cutover.PollCopy{Step: "p", Instance: "pgdog-1", Task: task, Slot: "loam_app_4", Shards: 4})
	require.Equal(t, int64(-1), in.(cutover.CopyPolled).LagBytes)

	// An instance or backend the executor was not given is an error answer, not a panic.
	in, _ = e.Execute(ctx, cutover.Pause{Step: "x", Instance: "pgdog-9", Database: "app"})
	require.ErrorIs(t, in.(cutover.Reply).Err, driver.ErrUnknownInstance)
	in, _ = e.Execute(ctx, cutover.Fence{Step: "f", Shard: "s9", Backend: shardmap.Backend{Host: "10.9.9.9", Port: 5432, Database: "app"}, Role: "app"})
	require.ErrorIs(t, in.(cutover.Reply).Err, driver.ErrUnknownBackend)
	in, _ = e.Execute(ctx, cutover.ListTasks{Step: "l", Instance: "pgdog-9"})
	require.ErrorIs(t, in.(cutover.TasksListed).Err, driver.ErrNoResharder)

	// Reports get no answer.
	_, reply = e.Execute(ctx, cutover.Alert{Step: "a", Reason: "r"})
	require.False(t, reply)
}

// TestCutoverDrainsBeforeCutover: the executor sends CUTOVER only once every shard of the
// layout traffic leaves has drained, fenced. A drain that keeps failing on one source shard
// keeps CUTOVER from ever being sent, and the cutover rolls back onto the source; a machine
// that sends no drain (the SkipDrain mutant) has its CUTOVER refused by the fake, which is
// what makes TestRunCutover's pass mean the drain ran.
func TestCutoverDrainsBeforeCutover(t *testing.T) {
	t.Run("drain fails", func(t *testing.T) {
		s := newCutoverSetup(t)
		stuck := driver.BackendKey(s.start.Record.Shards[1].Backend)
		s.fleet.drainErr[stuck] = errors.New("replication slot not drained after 30s")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.run(ctx))
		d := <-s.done
		require.Equal(t, cutover.RolledBack, d.Outcome, d.Reason)
		require.Zero(t, s.fleet.asked, "no CUTOVER was sent")

		in, _ := s.exec.Execute(ctx, cutover.Cutover{Step: "c", Instance: "pgdog-1", Task: 7,
			Drain: []cutover.SlotDrain{{Shard: "s1", Backend: s.start.Record.Shards[1].Backend, Slot: "loam_app_4"}}})
		err := in.(cutover.Reply).Err
		require.ErrorContains(t, err, `draining slot "loam_app_4" on shard s1 before CUTOVER: CUTOVER was not sent`)
		require.ErrorIs(t, err, cutover.ErrNotSent)
		require.ErrorContains(t, err, "not drained after 30s")
	})
	t.Run("no drain", func(t *testing.T) {
		s := newCutoverSetup(t)
		s.start.Plan.Options.Mutants.SkipDrain = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.run(ctx))
		require.Equal(t, cutover.RolledBack, (<-s.done).Outcome)
		require.NotZero(t, s.fleet.asked)
		require.Zero(t, s.fleet.cutovers, "every CUTOVER without a drain was refused")
	})
	t.Run("backend cannot drain", func(t *testing.T) {
		s := newCutoverSetup(t)
		b := s.start.Record.Shards[0].Backend
		s.exec.Backend = driver.Lookup(map[string]adapters.ShardBackend{driver.BackendKey(b): noDrain{shard{driver.BackendKey(b), s.fleet}}})
		in, _ := s.exec.Execute(context.Background(), cutover.Cutover{Step: "c", Instance: "pgdog-1", Task: 7,
			Drain: []cutover.SlotDrain{{Shard: "s0", Backend: b, Slot: "loam_app_4"}}})
		require.ErrorIs(t, in.(cutover.Reply).Err, driver.ErrCannotDrain)
		require.Zero(t, s.fleet.asked)
	})
}

// noDrain is a shard backend without AwaitSlotDrain.
type noDrain struct{ adapters.ShardBackend }
