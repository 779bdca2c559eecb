package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// fakeShard lists prepared transactions and nothing else: the executor is handed a
// driver.PreparedLister, so a fake with one method is all it can use.
type fakeShard struct {
	mu    sync.Mutex
	xacts []adapters.PreparedXact
	lists int
}

func (f *fakeShard) Prepared(context.Context) ([]adapters.PreparedXact, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return append([]adapters.PreparedXact(nil), f.xacts...), nil
}

func (f *fakeShard) set(xs ...adapters.PreparedXact) {
	f.mu.Lock()
	f.xacts = xs
	f.mu.Unlock()
}

type fakeRoster struct{ ps []adapters.RouterProcess }

func (f fakeRoster) Processes(context.Context) ([]adapters.RouterProcess, error) { return f.ps, nil }

// fakeSink records what reached it, in order; it refuses the first failFirst requests.
type fakeSink struct {
	mu        sync.Mutex
	log       []string
	raised    map[string]bool
	failFirst int
}

func newFakeSink(failFirst int) *fakeSink {
	return &fakeSink{raised: map[string]bool{}, failFirst: failFirst}
}

func (f *fakeSink) do(entry string, apply func()) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failFirst > 0 {
		f.failFirst--
		return errors.New("alertmanager: 503")
	}
	f.log = append(f.log, entry)
	apply()
	return nil
}

func (f *fakeSink) Raise(_ context.Context, a indoubt.Alert) error {
	return f.do("raise "+a.ID, func() { f.raised[a.ID] = true })
}

func (f *fakeSink) Clear(_ context.Context, id string) error {
	return f.do("clear "+id, func() { delete(f.raised, id) })
}

func (f *fakeSink) isRaised(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.raised[id]
}

// TestRunInDoubt: the monitor, run by the driver on real timers, alerts for a transaction
// whose coordinator is gone — after a sink that refused the first delivery takes the
// next — and clears the alert once the transaction is resolved; the alert reaches the sink
// before its clear, and the shards are only ever listed.
func TestRunInDoubt(t *testing.T) {
	s0, s1 := &fakeShard{}, &fakeShard{}
	old := time.Now().Add(-time.Hour)
	s0.set(adapters.PreparedXact{GID: "__pgdog_2pc_prod-app_2_7_0", Prepared: old, Owner: "app", Database: "app"})
	s1.set(adapters.PreparedXact{GID: "__pgdog_2pc_prod-app_2_7_1", Prepared: old, Owner: "app", Database: "app"})
	sink := newFakeSink(1)
	exec := &driver.InDoubtExecutor{
		Shard:  driver.Lookup(map[string]driver.PreparedLister{"s0": s0, "s1": s1}),
		Roster: fakeRoster{[]adapters.RouterProcess{{ID: "0", Started: time.UnixMilli(1)}}},
		Alerts: sink, Logger: quiet,
	}
	store := memstore.New()
	inputs := make(chan indoubt.Input, 1)
	inputs <- indoubt.Track{Shards: []string{"s0", "s1"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := indoubt.Options{Period: 20 * time.Millisecond, Threshold: time.Minute, Deployment: "prod-app"}
	go func() {
		done <- driver.Run(ctx, driver.InDoubt(exec, opts),
			driver.Config[indoubt.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard, Inputs: inputs})
	}()
	require.Eventually(t, func() bool { return sink.isRaised("coordinator/2") }, 5*time.Second, time.Millisecond)
	s0.set()
	s1.set()
	require.Eventually(t, func() bool { return !sink.isRaised("coordinator/2") }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	sink.mu.Lock()
	defer sink.mu.Unlock()
	first, last := -1, -1
	for i, e := range sink.log {
		switch e {
		case "raise coordinator/2":
			if first < 0 {
				first = i
			}
		case "clear coordinator/2":
			last = i
		}
	}
	require.True(t, first >= 0 && last > first, "raise must reach the sink before its clear: %v", sink.log)
	require.Positive(t, s0.lists)
}

// TestInDoubtExecutorRoster: the roster's start times reach the monitor in milliseconds, and
// an unknown start time as 0, which the monitor reads as unknown (not as 1970).
func TestInDoubtExecutorRoster(t *testing.T) {
	started := time.Date(2026, 3, 1, 12, 0, 0, 7_000_000, time.UTC)
	exec := &driver.InDoubtExecutor{Roster: fakeRoster{[]adapters.RouterProcess{{ID: "0", Started: started}, {ID: "a1b2c3d4"}}}, Logger: quiet}
	in, reply := exec.Execute(context.Background(), indoubt.ListInstances{Step: "r1/roster"})
	require.True(t, reply)
	require.Equal(t, indoubt.Roster{Step: "r1/roster", Processes: []indoubt.Process{{ID: "0", Started: started.UnixMilli()}, {ID: "a1b2c3d4"}}}, in)
}
