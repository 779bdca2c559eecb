package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/failover"
)

// world records what the failover's seams did, in order, across drivers.
type world struct {
	mu  sync.Mutex
	log []string
}

func (w *world) add(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf(format, args...))
}

func (w *world) events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log...)
}

// oldPrimary is the shard's old primary: its fence is all a failover uses of it. While
// down, every fence fails as an unreachable server's would.
type oldPrimary struct {
	key  string
	w    *world
	down bool
}

func (o *oldPrimary) FenceWrites(ctx context.Context, role string) error {
	if o.down {
		return &adapters.BackendError{Backend: o.key, Op: "FenceWrites", Code: "08006", Err: errors.New("connection refused")}
	}
	o.w.add("fence %s role=%s", o.key, role)
	return nil
}

func (o *oldPrimary) UnfenceWrites(context.Context, string) error {
	return errors.New("a failover never unfences")
}
func (o *oldPrimary) Status(context.Context) (adapters.BackendStatus, error) {
	return adapters.BackendStatus{}, errors.New("not used")
}
func (o *oldPrimary) Prepared(context.Context) ([]adapters.PreparedXact, error) {
	return nil, errors.New("not used")
}
func (o *oldPrimary) Checksum(context.Context, string, adapters.ShardFn) (adapters.TableDigest, error) {
	return adapters.TableDigest{}, errors.New("not used")
}

// loggedStore is a ShardMapStore that records each compare-and-set that took effect and
// may call afterCAS then (to kill the driver before the answer is fed back).
type loggedStore struct {
	*memstore.Store
	w        *world
	mu       sync.Mutex
	afterCAS func()
}

func (s *loggedStore) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	v, err := s.Store.CAS(ctx, db, expect, next)
	if err == nil {
		s.w.add("cas gen=%d version=%d", next.Generation, v)
		s.mu.Lock()
		after := s.afterCAS
		s.mu.Unlock()
		if after != nil {
			after()
		}
	}
	return v, err
}

// fakeVitess is vtctld as far as a failover sees it. While hold is set, a reparent waits
// for its context to end, then for release, and has no effect (the call never reached
// vtctld).
type fakeVitess struct {
	w       *world
	mu      sync.Mutex
	hold    bool
	held    chan struct{}
	release <-chan struct{}
}

func (v *fakeVitess) TabletExternallyReparented(ctx context.Context, keyspace, shard, tablet string) (adapters.Reparented, error) {
	v.mu.Lock()
	hold := v.hold
	v.mu.Unlock()
	if hold {
		v.held <- struct{}{}
		<-ctx.Done()
		<-v.release
		return adapters.Reparented{}, &adapters.VitessError{Op: "TabletExternallyReparented", Keyspace: keyspace, Shard: shard, Code: "Canceled", Err: ctx.Err()}
	}
	v.w.add("reparent %s/%s tablet=%s", keyspace, shard, tablet)
	return adapters.Reparented{Keyspace: keyspace, Shard: shard, NewPrimary: tablet}, nil
}

func (v *fakeVitess) SrvKeyspace(context.Context, string, string) ([]adapters.SrvPartition, error) {
	return nil, errors.New("not used")
}
func (v *fakeVitess) ApplyVSchema(context.Context, string, []byte) error {
	return errors.New("not used")
}

// failoverRecording keeps every command a run executed.
type failoverRecording struct {
	mu   sync.Mutex
	cmds []failover.Command
	next driver.Executor[failover.Input, failover.Command]
}

func (r *failoverRecording) Execute(ctx context.Context, c failover.Command) (failover.Input, bool) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
	return r.next.Execute(ctx, c)
}

func (r *failoverRecording) taken() []failover.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]failover.Command(nil), r.cmds...)
}

type failoverSetup struct {
	log   *slog.Logger // of the runs; quiet when nil
	w     *world
	store *loggedStore
	db    adapters.DBRef
	old   *oldPrimary
	exec  *driver.FailoverExecutor
	start failover.Start
	done  chan failover.Done
}

func newFailoverSetup(t *testing.T, rec *shardmap.Record, promoted shardmap.Backend) *failoverSetup {
	w := &world{}
	s := &failoverSetup{w: w, store: &loggedStore{Store: memstore.New(), w: w}, db: adapters.DBRef{Namespace: "ns", Database: rec.Router.Name}, done: make(chan failover.Done, 1)}
	v, err := s.store.Store.CAS(context.Background(), s.db, 0, rec)
	require.NoError(t, err)
	rec.Version = v
	s.old = &oldPrimary{key: driver.BackendKey(rec.Shards[0].Backend), w: w}
	s.exec = &driver.FailoverExecutor{DB: s.db, Store: s.store, Backend: driver.Lookup(map[string]adapters.ShardBackend{s.old.key: s.old}),
		OnDone: func(d failover.Done) { s.done <- d }, Logger: quiet}
	s.start = failover.Start{Record: rec, Shard: rec.Shards[0].Name, Promoted: promoted, Role: "app", Options: failover.Options{RetryAfter: 5}}
	return s
}

func (s *failoverSetup) run(ctx context.Context, exec driver.Executor[failover.Input, failover.Command], start ...failover.Input) error {
	log := s.log
	if log == nil {
		log = quiet
	}
	return driver.Run(ctx, driver.Failover(exec), driver.Config[failover.Input]{ID: s.db.String() + "/s0", Store: s.store, Logger: log, Trace: machine.Discard}, start...)
}

// stopped is a log handler that closes C when a run logs that it stopped: from then on
// the run feeds its machine nothing, so an answer given after C is lost with the run.
type stopped struct {
	C    chan struct{}
	once sync.Once
}

func newStopped() *stopped { return &stopped{C: make(chan struct{})} }

func (s *stopped) Enabled(context.Context, slog.Level) bool { return true }
func (s *stopped) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "stopped" {
		s.once.Do(func() { close(s.C) })
	}
	return nil
}
func (s *stopped) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s *stopped) WithGroup(string) slog.Handler      { return s }

func (s *failoverSetup) stored(t *testing.T) *shardmap.Record {
	rec, err := s.store.Read(context.Background(), s.db)
	require.NoError(t, err)
	return rec
}

// pgdogRecord is "app" on two Postgres primaries with one replica each, at generation 4.
func pgdogRecord() *shardmap.Record {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders"}}
	r := shardmap.NewPgHash("app", key,
		shardmap.Backend{Host: "10.0.1.1", Port: 5432, Database: "app", Replicas: []shardmap.Endpoint{{Host: "10.0.1.3", Port: 5432}}},
		shardmap.Backend{Host: "10.0.1.2", Port: 5432, Database: "app", Replicas: []shardmap.Endpoint{{Host: "10.0.1.4", Port: 5432}}})
	r.Generation = 4
	return r
}

var pgCreds = render.Credentials{Users: []render.User{{Name: "app", Password: "app-secret"}}, Admin: render.Admin{Password: "admin-secret"}}

func renderPgDog(r *shardmap.Record) (render.Files, error) {
	return render.PgDog(r, pgCreds, render.PgDogOptions{TLS: render.TLS{Certificate: "/tls/pgdog.crt", PrivateKey: "/tls/pgdog.key", ServerCA: "/tls/shards-ca.pem"}})
}

// pushing is a ConfigPush run fed through a PushHandoff, writing into a real configmap
// directory and reloading fake instances, as a daemon would wire it.
type pushing struct {
	dir      *configmap.Dir
	fakes    []*fakeInstance
	outcomes chan configpush.Outcome
	handoff  *driver.PushHandoff
	stop     func() error
}

func startPushing(t *testing.T, store adapters.BlobStore) *pushing {
	dir, err := configmap.NewDir(filepath.Join(t.TempDir(), "pgdog"))
	require.NoError(t, err)
	insts, fakes, ids := fakeInstances(3, 0)
	p := &pushing{dir: dir, fakes: fakes, outcomes: make(chan configpush.Outcome, 4)}
	inputs := make(chan configpush.Input)
	exec := &driver.ConfigPushExecutor{Target: dir, Instance: driver.Lookup(insts), OnOutcome: func(o configpush.Outcome) { p.outcomes <- o }, Logger: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- driver.Run(ctx, driver.ConfigPush(exec, configpush.Options{}),
			driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard, Inputs: inputs})
	}()
	p.stop = func() error { cancel(); return <-errc }
	t.Cleanup(func() { p.stop() })
	p.handoff = &driver.PushHandoff{Inputs: inputs, Render: renderPgDog, Instances: func() []string { return ids }, Store: store, ID: "ns/app"}
	return p
}

// hand is the daemon's wiring of FailoverExecutor.Handoff, recording the hand-off.
func (p *pushing) hand(w *world) func(context.Context, *shardmap.Record) error {
	return func(ctx context.Context, rec *shardmap.Record) error {
		err := p.handoff.Hand(ctx, rec)
		if err == nil {
			w.add("push gen=%d", rec.Generation)
		}
		return err
	}
}

// TestRunFailoverPgDog: a PgDog shard's failover through the driver: the old primary is
// fenced, the record names the promoted primary at a new generation, and that generation
// is handed to a running ConfigPush, which writes the files naming the promoted primary
// and reloads every instance — in that order.
func TestRunFailoverPgDog(t *testing.T) {
	rec := pgdogRecord()
	s := newFailoverSetup(t, rec, shardmap.Backend{Host: "10.0.1.3", Port: 5432, Database: "app"})
	p := startPushing(t, s.store)
	s.exec.Handoff = p.hand(s.w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx, s.exec, s.start))

	d := <-s.done
	require.Equal(t, failover.Done{Outcome: failover.Repointed, Generation: 5, Fenced: true}, d)
	require.Equal(t, []string{"fence 10.0.1.1:5432/app role=app", "cas gen=5 version=2", "push gen=5"}, s.w.events())
	got := s.stored(t)
	require.Equal(t, uint64(5), got.Generation)
	require.Equal(t, shardmap.Backend{Host: "10.0.1.3", Port: 5432, Database: "app"}, got.Shards[0].Backend, "promoted, without itself as a replica")
	require.Equal(t, pgdogRecord().Shards[1], got.Shards[1], "the other shard is untouched")

	o := <-p.outcomes
	require.Equal(t, uint64(5), o.Generation)
	require.Len(t, o.Confirmed, 3)
	g, err := p.dir.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(5), g)
	cfg, err := os.ReadFile(filepath.Join(p.dir.Path(), render.PgDogConfigFile))
	require.NoError(t, err)
	require.Contains(t, string(cfg), `host = "10.0.1.3"`)
	require.NotContains(t, string(cfg), `host = "10.0.1.1"`, "no router file names the fenced primary")
	for _, f := range p.fakes {
		require.Equal(t, uint64(5), f.gen, f.id)
	}
}

// vitessRecord is keyspace "customer" on two tablets' MySQL primaries, at generation 7.
func vitessRecord(t *testing.T) *shardmap.Record {
	be := func(host, tablet string) shardmap.Backend {
		return shardmap.Backend{Host: host, Port: 3306, Database: "customer", Tablet: tablet}
	}
	r, err := shardmap.NewVindex("customer", shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders"}}, shardmap.VindexHash,
		be("10.0.2.1", "zone1-0000000100"), be("10.0.2.2", "zone1-0000000200"))
	require.NoError(t, err)
	r.Generation = 7
	return r
}

// TestRunFailoverVitess: a Vitess shard's failover through the driver: the old primary is
// fenced, Vitess is told the promoted tablet is primary, then the record mirrors it; no
// push (vtgate routes by Vitess's topology).
func TestRunFailoverVitess(t *testing.T) {
	rec := vitessRecord(t)
	promoted := shardmap.Backend{Host: "10.0.2.3", Port: 3306, Database: "customer", Tablet: "zone1-0000000101"}
	s := newFailoverSetup(t, rec, promoted)
	s.exec.Vitess = &fakeVitess{w: s.w}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.run(ctx, s.exec, s.start))

	require.Equal(t, failover.Done{Outcome: failover.Repointed, Generation: 8, Fenced: true}, <-s.done)
	require.Equal(t, []string{"fence 10.0.2.1:3306/customer role=app", "reparent customer/-80 tablet=zone1-0000000101", "cas gen=8 version=2"}, s.w.events())
	require.Equal(t, promoted, s.stored(t).Shards[0].Backend)
}

// TestRunFailoverOldPrimaryDown: an old primary that cannot be reached (the usual reason
// for a failover) is tried Attempts times on real timers; the failover goes on without
// the fence, says so, and the record still moves.
func TestRunFailoverOldPrimaryDown(t *testing.T) {
	rec := vitessRecord(t)
	s := newFailoverSetup(t, rec, shardmap.Backend{Host: "10.0.2.3", Port: 3306, Database: "customer", Tablet: "zone1-0000000101"})
	s.old.down = true
	s.exec.Vitess = &fakeVitess{w: s.w}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc := &failoverRecording{next: s.exec}
	require.NoError(t, s.run(ctx, rc, s.start))
	require.Equal(t, failover.Done{Outcome: failover.Repointed, Generation: 8, Fenced: false}, <-s.done)
	fences, alerts := 0, 0
	for _, c := range rc.taken() {
		switch c.(type) {
		case failover.FenceOld:
			fences++
		case failover.Alert:
			alerts++
		}
	}
	require.Equal(t, 3, fences, "the default Attempts")
	require.Equal(t, 1, alerts)
	require.Equal(t, []string{"reparent customer/-80 tablet=zone1-0000000101", "cas gen=8 version=2"}, s.w.events())
}

// TestRunFailoverKilledDuringReparent: the driver dies while TabletExternallyReparented is
// in flight, after the fence's answer was saved. The next driver restores the snapshot,
// sends the same Reparent (same step id and attempt) and finishes; the fence is not sent
// again.
func TestRunFailoverKilledDuringReparent(t *testing.T) {
	rec := vitessRecord(t)
	s := newFailoverSetup(t, rec, shardmap.Backend{Host: "10.0.2.3", Port: 3306, Database: "customer", Tablet: "zone1-0000000101"})
	stop := newStopped()
	s.log = slog.New(stop)
	v := &fakeVitess{w: s.w, hold: true, held: make(chan struct{}, 1), release: stop.C}
	s.exec.Vitess = v
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, kill := context.WithCancel(ctx)
	run1 := &failoverRecording{next: s.exec}
	errc := make(chan error, 1)
	go func() { errc <- s.run(first, run1, s.start) }()
	<-v.held
	kill()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Equal(t, []string{"fence 10.0.2.1:3306/customer role=app"}, s.w.events())

	v.mu.Lock()
	v.hold = false
	v.mu.Unlock()
	s.log = nil
	run2 := &failoverRecording{next: s.exec}
	require.NoError(t, s.run(ctx, run2))
	require.Equal(t, failover.Done{Outcome: failover.Repointed, Generation: 8, Fenced: true}, <-s.done)
	require.Equal(t, []string{"fence 10.0.2.1:3306/customer role=app", "reparent customer/-80 tablet=zone1-0000000101", "cas gen=8 version=2"}, s.w.events())

	var sent failover.Reparent
	for _, c := range run1.taken() {
		if r, ok := c.(failover.Reparent); ok {
			sent = r
		}
	}
	cmds := run2.taken()
	require.IsType(t, failover.Reparent{}, cmds[0], "the restored machine first re-sends what was in flight")
	require.Equal(t, sent, cmds[0], "same step id and attempt")
	for _, c := range cmds {
		_, fenced := c.(failover.FenceOld)
		require.False(t, fenced, "the finished fence was sent again: %v", c)
	}
}

// TestRunFailoverKilledAfterRecordWrite: the driver dies right after the record's
// compare-and-set took effect, before its answer was fed back. The next driver sends the
// same write (same step id, attempt and expected version), which conflicts with the
// record it wrote itself; the machine recognises that record as its repoint and goes on
// to the push. Nothing is fenced or written twice.
func TestRunFailoverKilledAfterRecordWrite(t *testing.T) {
	rec := pgdogRecord()
	s := newFailoverSetup(t, rec, shardmap.Backend{Host: "10.0.1.3", Port: 5432, Database: "app"})
	p := startPushing(t, s.store)
	s.exec.Handoff = p.hand(s.w)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, kill := context.WithCancel(ctx)
	stop := newStopped()
	s.log = slog.New(stop)
	s.store.afterCAS = func() { kill(); <-stop.C }
	run1 := &failoverRecording{next: s.exec}
	require.ErrorIs(t, s.run(first, run1, s.start), context.Canceled)
	s.store.mu.Lock()
	s.store.afterCAS = nil
	s.store.mu.Unlock()
	s.log = nil
	require.Equal(t, []string{"fence 10.0.1.1:5432/app role=app", "cas gen=5 version=2"}, s.w.events())

	run2 := &failoverRecording{next: s.exec}
	require.NoError(t, s.run(ctx, run2))
	require.Equal(t, failover.Done{Outcome: failover.Repointed, Generation: 5, Fenced: true}, <-s.done)
	require.Equal(t, []string{"fence 10.0.1.1:5432/app role=app", "cas gen=5 version=2", "push gen=5"}, s.w.events())
	require.Equal(t, uint64(2), s.stored(t).Version, "the record was written once")

	sent := run1.taken()[len(run1.taken())-1].(failover.WriteRecord)
	cmds := run2.taken()
	again := cmds[0].(failover.WriteRecord)
	require.Equal(t, []any{sent.Step, sent.Attempt, sent.Expect}, []any{again.Step, again.Attempt, again.Expect}, "the same write is sent again")
	for _, c := range cmds {
		_, fenced := c.(failover.FenceOld)
		require.False(t, fenced, "the finished fence was sent again: %v", c)
	}
	require.IsType(t, failover.Push{}, cmds[1], "the conflict with its own write leads to the push")
	require.Equal(t, uint64(5), (<-p.outcomes).Generation)
}

// TestFailoverExecutorAnswers: what the executor feeds back for the cases the machine
// branches on, and for seams it was not given.
func TestFailoverExecutorAnswers(t *testing.T) {
	rec := pgdogRecord()
	s := newFailoverSetup(t, rec, shardmap.Backend{Host: "10.0.1.3", Port: 5432, Database: "app"})
	ctx := context.Background()
	e := s.exec

	// A lost compare-and-set carries the record that won; the attempt is echoed.
	in, reply := e.Execute(ctx, failover.WriteRecord{Step: "w", Attempt: 2, Expect: 99, Record: rec})
	require.True(t, reply)
	rw := in.(failover.RecordWritten)
	require.Equal(t, 2, rw.Attempt)
	require.ErrorIs(t, rw.Err, adapters.ErrConflict)
	require.Equal(t, uint64(1), rw.Conflict.Version)

	// A backend, a Vitess control or a hand-off the executor was not given is an error
	// answer, not a panic.
	in, _ = e.Execute(ctx, failover.FenceOld{Step: "f", Attempt: 1, Shard: "s9", Backend: shardmap.Backend{Host: "10.9.9.9", Port: 5432, Database: "app"}, Role: "app"})
	require.ErrorIs(t, in.(failover.Reply).Err, driver.ErrUnknownBackend)
	in, _ = e.Execute(ctx, failover.Reparent{Step: "r", Attempt: 1, Keyspace: "customer", Shard: "-80", Tablet: "zone1-0000000101"})
	require.ErrorIs(t, in.(failover.Reply).Err, driver.ErrNoVitess)
	in, _ = e.Execute(ctx, failover.Push{Step: "p", Attempt: 3, Generation: 5, Record: rec})
	require.ErrorIs(t, in.(failover.Reply).Err, driver.ErrNoHandoff)
	require.Equal(t, 3, in.(failover.Reply).Attempt)

	// Vitess's error reaches the machine whole.
	e.Vitess = wrongShard{}
	in, _ = e.Execute(ctx, failover.Reparent{Step: "r", Attempt: 1, Keyspace: "customer", Shard: "-80", Tablet: "zone1-0000000201"})
	require.ErrorIs(t, in.(failover.Reply).Err, adapters.ErrWrongShard)

	// Reports get no answer.
	_, reply = e.Execute(ctx, failover.Alert{Step: "a", Reason: "r"})
	require.False(t, reply)
}

// wrongShard is a vtctld whose check found the tablet in another shard.
type wrongShard struct{ adapters.VitessControl }

func (wrongShard) TabletExternallyReparented(_ context.Context, keyspace, shard, tablet string) (adapters.Reparented, error) {
	return adapters.Reparented{}, &adapters.VitessError{Op: "GetTablets", Keyspace: keyspace, Shard: shard, Tablet: tablet, Err: adapters.ErrWrongShard}
}

// notWritable is a vtctld whose promoted tablet's MySQL is still read-only.
type notWritable struct{ adapters.VitessControl }

func (notWritable) TabletExternallyReparented(_ context.Context, keyspace, shard, tablet string) (adapters.Reparented, error) {
	return adapters.Reparented{}, &adapters.VitessError{Op: "ExecuteFetchAsDBA", Keyspace: keyspace, Shard: shard, Tablet: tablet, Err: adapters.ErrNotWritable}
}

// TestPushHandoff: the hand-off refuses what ConfigPush would refuse, and does not report
// success until a ConfigPush run has taken the push: with no run reading Inputs, or a run
// that never saves the generation, it fails at ctx's deadline saying so.
func TestPushHandoff(t *testing.T) {
	rec := pgdogRecord()
	rec.Version = 3
	store := memstore.New()
	ids := []string{"pgdog-0"}
	ctx := context.Background()
	h := &driver.PushHandoff{Inputs: make(chan configpush.Input), Render: renderPgDog, Instances: func() []string { return nil }, Store: store, ID: "ns/app"}
	require.ErrorContains(t, h.Hand(ctx, rec), "no router instance")

	h.Instances = func() []string { return ids }
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorContains(t, h.Hand(short, rec), "did not take generation 4 (is its run going?)")

	// Taken from Inputs but never saved: a run that is not the one Store and ID name.
	inputs := make(chan configpush.Input, 1)
	h.Inputs = inputs
	short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	err := h.Hand(short2, rec)
	require.ErrorContains(t, err, "has not saved generation 4")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	p := (<-inputs).(configpush.Push)
	require.Equal(t, uint64(4), p.Generation)
	require.Equal(t, ids, p.Instances)
	require.True(t, strings.HasPrefix(string(p.Files[0].Data), "# pgdog.toml"), "rendered files")

	// Without a store, taken from Inputs is taken.
	h.Store = nil
	require.NoError(t, h.Hand(ctx, rec))
}
