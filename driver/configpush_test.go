package driver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
	"loam.dev/router/machine/configpush"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// push is a Push typed as the machine's Input, as Run's start inputs are.
func push(gen uint64, ids []string) configpush.Input {
	rec := &shardmap.Record{Version: 3, Generation: gen, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	return configpush.Push{Record: rec, Generation: gen, Files: render.Files{{Name: "pgdog.toml", Data: []byte("# rendered\n")}}, Instances: ids}
}

// rerender renders what push(gen) pushes, as a restarted daemon renders the store's record.
func rerender(gen uint64) driver.Rerender {
	return func() (*shardmap.Record, render.Files, error) {
		p := push(gen, nil).(configpush.Push)
		return p.Record, p.Files, nil
	}
}

// recording wraps an executor and keeps every command it was given, in order.
type recording struct {
	mu   sync.Mutex
	cmds []configpush.Command
	next driver.Executor[configpush.Input, configpush.Command]
}

func (r *recording) Execute(ctx context.Context, c configpush.Command) (configpush.Input, bool) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	r.mu.Unlock()
	return r.next.Execute(ctx, c)
}

func (r *recording) taken() []configpush.Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]configpush.Command(nil), r.cmds...)
}

func snapshotOf(t *testing.T, store adapters.BlobStore, id string) configpush.Snapshot {
	t.Helper()
	b, err := store.GetBlob(context.Background(), driver.SnapshotKey("configpush", id))
	require.NoError(t, err)
	var s configpush.Snapshot
	require.NoError(t, json.Unmarshal(b.Data, &s))
	return s
}

func stages(s configpush.Snapshot) map[string]configpush.Stage {
	out := map[string]configpush.Stage{}
	for _, in := range s.Push.Instances {
		out[in.ID] = in.Stage
	}
	return out
}

// TestRunConfigPush: a push through the driver writes the files once, reloads and
// observes every instance, and the run ends by itself with every instance confirmed and
// the Outcome reported.
func TestRunConfigPush(t *testing.T) {
	insts, fakes, ids := fakeInstances(5, 0)
	target := &fakeTarget{}
	store := memstore.New()
	var outcome configpush.Outcome
	exec := &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet,
		OnOutcome: func(o configpush.Outcome) { outcome = o }}
	err := driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard}, push(4, ids))
	require.NoError(t, err)
	require.Equal(t, 1, target.writes)
	require.Equal(t, uint64(4), target.gen)
	for _, f := range fakes {
		require.Equal(t, 1, f.applied, f.id)
		require.Equal(t, uint64(4), f.gen, f.id)
	}
	require.Equal(t, ids, outcome.Confirmed)
	s := snapshotOf(t, store, "ns/app")
	require.True(t, s.Push.Done)
	require.Equal(t, uint64(4), s.Written)
}

// TestRunRetriesOnRealTimers: a failed reload is retried after the machine's backoff, which
// the driver turns into a real timer.
func TestRunRetriesOnRealTimers(t *testing.T) {
	insts, fakes, ids := fakeInstances(2, 0)
	fakes[1].failApply = 2
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet}
	opts := configpush.Options{Backoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	err := driver.Run(context.Background(), driver.ConfigPush(exec, opts),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard}, push(4, ids))
	require.NoError(t, err)
	require.Equal(t, 3, fakes[1].calls)
	require.Equal(t, 1, fakes[1].applied)
}

// TestRunReportsSilentInstance: an instance that never answers is given up on after
// MaxAttempts deadlines and reported stuck; the run ends instead of waiting for it (its hung
// calls end at the driver's CallTimeout).
func TestRunReportsSilentInstance(t *testing.T) {
	insts, fakes, ids := fakeInstances(3, 0)
	fakes[2].hold = true
	fakes[2].held = make(chan string, 10)
	var outcome configpush.Outcome
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet,
		OnOutcome: func(o configpush.Outcome) { outcome = o }}
	opts := configpush.Options{StepTimeout: 20 * time.Millisecond, Backoff: time.Millisecond, MaxAttempts: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := driver.Run(ctx, driver.ConfigPush(exec, opts),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard, CallTimeout: 100 * time.Millisecond}, push(4, ids))
	require.NoError(t, err)
	require.Equal(t, []string{"pgdog-2"}, outcome.Stuck)
	require.Equal(t, []string{"pgdog-0", "pgdog-1"}, outcome.Confirmed)
}

// TestKillAndResume: a driver killed mid-push, with two reloads in flight, is replaced by
// one that restores the snapshot from the store. The new driver executes no step whose
// reply the old one had saved, re-issues the two in-flight reloads under the same step id
// and attempt, and finishes the push; every reload takes effect exactly once.
func TestKillAndResume(t *testing.T) {
	insts, fakes, ids := fakeInstances(6, 0)
	target := &fakeTarget{}
	store := memstore.New()
	cfg := driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard}
	slow := fakes[3:5]
	for _, f := range slow {
		f.hold = true
	}
	run1 := &recording{next: &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet}}
	ctx, kill := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- driver.Run(ctx, driver.ConfigPush(run1, configpush.Options{}), cfg, push(4, ids)) }()

	// Kill once both slow reloads are in flight and the four others are saved as confirmed.
	<-slow[0].held
	<-slow[1].held
	require.Eventually(t, func() bool {
		n := 0
		for _, st := range stages(snapshotOf(t, store, "ns/app")) {
			if st == configpush.StageConfirmed {
				n++
			}
		}
		return n == 4
	}, 5*time.Second, time.Millisecond)
	kill()
	require.ErrorIs(t, <-done, context.Canceled)

	saved := snapshotOf(t, store, "ns/app")
	before := stages(saved)
	for _, f := range slow {
		require.Equal(t, configpush.StageReload, before[f.id])
		f.mu.Lock()
		f.hold = false
		f.mu.Unlock()
		require.Zero(t, f.applied, "a reload whose context ended took effect")
	}

	run2 := &recording{next: &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet}}
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPushRendered(run2, configpush.Options{}, rerender(4)), cfg))

	// The second driver touched only the two instances in flight, with the same requests.
	first := map[string]configpush.Reload{}
	for _, c := range run1.taken() {
		if r, ok := c.(configpush.Reload); ok {
			first[r.Instance] = r
		}
	}
	for _, c := range run2.taken() {
		switch c := c.(type) {
		case configpush.WriteFiles:
			t.Fatalf("files written again after the restart: %v", c)
		case configpush.Reload:
			require.NotEqual(t, configpush.StageConfirmed, before[c.Instance], "%v re-executed a finished step", c)
			require.Equal(t, first[c.Instance].Step, c.Step)
			require.Equal(t, first[c.Instance].Attempt, c.Attempt, "a re-issued step keeps its attempt")
		case configpush.Observe:
			require.NotEqual(t, configpush.StageConfirmed, before[c.Instance], "%v re-executed a finished step", c)
		}
	}
	require.Equal(t, 1, target.writes)
	for _, f := range fakes {
		require.Equal(t, 1, f.applied, "%s: every reload takes effect exactly once", f.id)
	}
	after := snapshotOf(t, store, "ns/app")
	require.True(t, after.Push.Done)
	for id, st := range stages(after) {
		require.Equal(t, configpush.StageConfirmed, st, id)
	}
}

// TestSecondDriverStops: two drivers of the same machine cannot both save: the one whose
// save conflicts stops with adapters.ErrConflict instead of executing commands.
func TestSecondDriverStops(t *testing.T) {
	insts, _, ids := fakeInstances(1, 0)
	store := memstore.New()
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet}
	cfg := driver.Config[configpush.Input]{ID: "ns/app", Store: &racingStore{BlobStore: store}, Logger: quiet, Trace: machine.Discard}
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard}, push(4, ids)))
	err := driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}), cfg, push(5, ids))
	require.ErrorIs(t, err, adapters.ErrConflict)
}

// racingStore lets another writer save the blob between this driver's load and its save.
type racingStore struct {
	adapters.BlobStore
	once sync.Once
}

func (r *racingStore) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	b, err := r.BlobStore.GetBlob(ctx, key)
	if err == nil {
		r.once.Do(func() { _, err = r.BlobStore.PutBlob(ctx, key, b.Version, b.Data) })
	}
	return b, err
}

// TestRestoreFailureStops: a snapshot that cannot be restored stops the run with
// ErrRestore; the driver does not start the machine over.
func TestRestoreFailureStops(t *testing.T) {
	store := memstore.New()
	_, err := store.PutBlob(context.Background(), driver.SnapshotKey("configpush", "ns/app"), 0, []byte(`{"push":{"gen":0}}`))
	require.NoError(t, err)
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Logger: quiet}
	err = driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
		driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard})
	require.ErrorIs(t, err, driver.ErrRestore)
	require.ErrorContains(t, err, "push.gen is 0")
}

// TestConfigPushExecutorNewerGeneration: a target's refusal to go backwards
// (adapters.ErrNewerGeneration) reaches the machine as configpush.ErrNewerGeneration, which
// is what makes it end the stale push as superseded instead of retrying it.
func TestConfigPushExecutorNewerGeneration(t *testing.T) {
	target := &fakeTarget{}
	exec := &driver.ConfigPushExecutor{Target: target, Logger: quiet}
	ctx := context.Background()
	in, _ := exec.Execute(ctx, configpush.WriteFiles{Step: "g5/files", Attempt: 1, Generation: 5})
	require.NoError(t, in.(configpush.FilesWritten).Err)
	in, _ = exec.Execute(ctx, configpush.WriteFiles{Step: "g4/files", Attempt: 1, Generation: 4})
	err := in.(configpush.FilesWritten).Err
	require.ErrorIs(t, err, configpush.ErrNewerGeneration)
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	var ge *adapters.GenerationError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, uint64(5), ge.Have)

	// Any other failure is not taken for a newer generation.
	exec.Target = failingTarget{}
	in, _ = exec.Execute(ctx, configpush.WriteFiles{Step: "g6/files", Attempt: 1, Generation: 6})
	require.Error(t, in.(configpush.FilesWritten).Err)
	require.NotErrorIs(t, in.(configpush.FilesWritten).Err, configpush.ErrNewerGeneration)
}

type failingTarget struct{}

func (failingTarget) WriteFiles(context.Context, uint64, render.Files) error {
	return errors.New("disk full")
}

// TestRunAwaitsFiles: with AwaitFiles the executor asks FilesSeen before each reload, and
// an instance that sees older files is asked again after the backoff and reloaded only
// once it sees the pushed generation; without FilesSeen it is never reloaded.
func TestRunAwaitsFiles(t *testing.T) {
	insts, fakes, ids := fakeInstances(2, 0)
	var mu sync.Mutex
	asked := map[string]int{}
	exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet,
		FilesSeen: func(ctx context.Context, id string) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			asked[id]++
			if id == ids[1] && asked[id] < 3 {
				return 3, nil // the kubelet has not projected generation 4 yet
			}
			return 4, nil
		}}
	opts := configpush.Options{AwaitFiles: true, Backoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond}
	var outcome configpush.Outcome
	exec.OnOutcome = func(o configpush.Outcome) { outcome = o }
	err := driver.Run(context.Background(), driver.ConfigPush(exec, opts),
		driver.Config[configpush.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard}, push(4, ids))
	require.NoError(t, err)
	require.Equal(t, map[string]int{ids[0]: 1, ids[1]: 3}, asked)
	require.Equal(t, 1, fakes[1].applied)
	require.Equal(t, ids, outcome.Confirmed)

	insts, fakes, ids = fakeInstances(1, 0)
	exec = &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet, OnOutcome: func(o configpush.Outcome) { outcome = o }}
	opts.AwaitAttempts = 2
	err = driver.Run(context.Background(), driver.ConfigPush(exec, opts),
		driver.Config[configpush.Input]{ID: "ns/app2", Logger: quiet, Trace: machine.Discard}, push(4, ids))
	require.NoError(t, err)
	require.Zero(t, fakes[0].applied)
	require.Equal(t, ids, outcome.Stuck)
}
