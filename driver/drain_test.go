package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// TestDrainFinishesWhatStarted: a drain asked while two slow reloads are executing lets
// them finish and saves their replies, starts none of the observes those replies lead to,
// and returns ErrDrained. The next driver then executes only those observes: nothing is
// lost, nothing that finished is repeated, and no reply was dropped half-way.
func TestDrainFinishesWhatStarted(t *testing.T) {
	insts, fakes, ids := fakeInstances(4, 0)
	slow := fakes[2:]
	for _, f := range slow {
		f.latency = 150 * time.Millisecond
	}
	target := &fakeTarget{}
	store := memstore.New()
	drain := make(chan struct{})
	cfg := driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard, Drain: drain}
	run1 := &recording{next: &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet}}
	done := make(chan error, 1)
	go func() {
		done <- driver.Run(context.Background(), driver.ConfigPush(run1, configpush.Options{}), cfg, push(4, ids))
	}()

	// Drain once the fast instances are confirmed and the slow reloads are under way.
	require.Eventually(t, func() bool {
		if _, err := store.GetBlob(context.Background(), driver.SnapshotKey("configpush", "ns/app")); err != nil {
			return false
		}
		n := 0
		for _, st := range stages(snapshotOf(t, store, "ns/app")) {
			if st == configpush.StageConfirmed {
				n++
			}
		}
		return n == 2
	}, 5*time.Second, time.Millisecond)
	close(drain)
	require.ErrorIs(t, <-done, driver.ErrDrained)

	for _, f := range slow {
		require.Equal(t, 1, f.applied, "%s: the reload in flight finished during the drain", f.id)
	}
	saved := stages(snapshotOf(t, store, "ns/app"))
	for _, f := range slow {
		require.Equal(t, configpush.StageObserve, saved[f.id], "%s: its reload's reply was fed and saved", f.id)
	}
	for _, c := range run1.taken() {
		if o, ok := c.(configpush.Observe); ok {
			require.NotContains(t, []string{slow[0].id, slow[1].id}, o.Instance, "an observe was started after the drain was asked")
		}
	}

	cfg.Drain = nil
	run2 := &recording{next: &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet}}
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPushRendered(run2, configpush.Options{}, rerender(4)), cfg))
	var observed []string
	for _, c := range run2.taken() {
		if _, report := c.(configpush.Outcome); report {
			continue
		}
		o, ok := c.(configpush.Observe)
		require.True(t, ok, "the next driver executed %v, which had finished before the drain", c)
		observed = append(observed, o.Instance)
	}
	require.ElementsMatch(t, []string{slow[0].id, slow[1].id}, observed)
	for _, f := range fakes {
		require.Equal(t, 1, f.applied, "%s: exactly one reload took effect", f.id)
	}
}
