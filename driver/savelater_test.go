package driver_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
)

// fanOut is a machine that sends three calls, counts their replies and, once all three are
// in, sends one more: the shape of a cutover's step (three Pauses, then the fence).
type fanOut struct{ S fanOutSnap }

type fanOutSnap struct{ Fed, Sent int }

func (m *fanOut) On(_ *machine.Ctx, in string) []string {
	switch in {
	case "start":
		m.S.Sent += 3
		return []string{"call-1", "call-2", "call-3"}
	case "reply":
		if m.S.Fed++; m.S.Fed == 3 {
			m.S.Sent++
			return []string{"after"}
		}
	}
	return nil
}

func (m *fanOut) Snapshot() fanOutSnap { return m.S }

// savesOf counts the snapshot saves of a store.
type savesOf struct {
	*memstore.Store
	mu    sync.Mutex
	saves int
}

func (s *savesOf) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if strings.HasPrefix(key, "machine/") {
		s.mu.Lock()
		s.saves++
		s.mu.Unlock()
	}
	return s.Store.PutBlob(ctx, key, expect, data)
}

func savedFanOut(t *testing.T, s adapters.BlobStore) fanOutSnap {
	b, err := s.GetBlob(context.Background(), driver.SnapshotKey("fanout", "x"))
	require.NoError(t, err)
	var snap fanOutSnap
	require.NoError(t, json.Unmarshal(b.Data, &snap))
	return snap
}

// TestStepsThatSendNothingSaveLater: a step that only feeds a reply, with commands still in
// flight, is not saved on its own; the step that sends the next command is saved before
// that command starts, holding every reply fed before it; and once nothing is in flight the
// last step is saved before Run returns. Three saves for five steps or more: the start, the
// step that sends "after", the last reply.
func TestStepsThatSendNothingSaveLater(t *testing.T) {
	store := &savesOf{Store: memstore.New()}
	release := make(chan struct{})
	var atAfter fanOutSnap
	exec := driver.ExecutorFunc[string, string](func(ctx context.Context, c string) (string, bool) {
		switch c {
		case "call-3":
			<-release // the slow instance: the other two replies are fed meanwhile
		case "after":
			atAfter = savedFanOut(t, store)
		}
		return "reply", true
	})
	kind := driver.Kind[string, string, fanOutSnap]{Name: "fanout",
		New:     func() driver.Machine[string, string, fanOutSnap] { return &fanOut{} },
		Restore: func(s fanOutSnap) (driver.Machine[string, string, fanOutSnap], error) { return &fanOut{S: s}, nil },
		Timer:   func(machine.TimerFired) string { return "timer" }, Restarted: "restarted", Exec: exec}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	tl := &driver.Timeline{}
	go func() {
		done <- driver.Run(ctx, kind, driver.Config[string]{ID: "x", Store: store, Logger: quiet, Trace: machine.Discard, Timeline: tl}, "start")
	}()
	require.Eventually(t, func() bool {
		fed := 0
		for _, sp := range spansOf(tl, driver.SpanStep) {
			fed += sp.N
		}
		return fed == 3
	}, time.Minute, time.Millisecond, "the start and the replies of call-1 and call-2 fed")
	require.Equal(t, fanOutSnap{Sent: 3}, savedFanOut(t, store), "the start step saved; the two replies not yet")
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, fanOutSnap{Fed: 3, Sent: 4}, atAfter, "the step sending after was saved, with the three replies, before after started")
	require.Equal(t, fanOutSnap{Fed: 4, Sent: 4}, savedFanOut(t, store), "the last step, which sent nothing, saved before Run returned")
	store.mu.Lock()
	defer store.mu.Unlock()
	require.Equal(t, 3, store.saves, "the replies of call-1 and call-2 were not saved on their own")
}
