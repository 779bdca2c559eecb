package causalread

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine/causal"
)

var (
	tp  = lsn.Endpoint{Host: "p", Port: 5432}
	ts1 = lsn.Endpoint{Host: "s1", Port: 5432}
	ts2 = lsn.Endpoint{Host: "s2", Port: 5432}
)

// fakeSelector drives the real machine with pools that are just names; down endpoints refuse.
func fakeSelector(t *testing.T, cfg CausalConfig, down ...lsn.Endpoint) *selector[string] {
	s := newSelector(cfg, func(ctx context.Context, ep lsn.Endpoint, pool any) (string, error) {
		for _, d := range down {
			if d == ep {
				return "", errors.New("connection refused")
			}
		}
		return pool.(string), nil
	})
	for _, ep := range []lsn.Endpoint{tp, ts1, ts2} {
		require.NoError(t, s.addEndpoint(ep, "conn@"+ep.String(), nil))
	}
	require.NoError(t, s.setHostgroup(1, []lsn.Endpoint{tp}))
	require.NoError(t, s.setHostgroup(2, []lsn.Endpoint{ts1, ts2}))
	t.Cleanup(s.close)
	return s
}

func manualClock(start int64) (postgres.Clock, *atomic.Int64) {
	var now atomic.Int64
	now.Store(start)
	return func() int64 { return now.Load() }, &now
}

type result struct {
	conn string
	ep   lsn.Endpoint
	err  error
}

func goAcquire(s *selector[string], ctx context.Context, fe string, hg, from int, isCausal bool) chan result {
	out := make(chan result, 1)
	go func() {
		c, ep, err := s.acquire(ctx, fe, hg, from, isCausal)
		out <- result{c, ep, err}
	}()
	return out
}

func waiting(s *selector[string]) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.Waiting()
}

func TestSelectorCausalWaitsForProgress(t *testing.T) {
	clock, now := manualClock(1000)
	s := fakeSelector(t, CausalConfig{Clock: clock})

	// Ordinary requests go through with no LSN state at all.
	c, _, err := s.acquire(context.Background(), "f", 2, 0, false)
	require.NoError(t, err)
	require.Contains(t, []string{"conn@s1:5432", "conn@s2:5432"}, c)

	s.executed("f", 1, tp) // the write completed at 1000
	res := goAcquire(s, context.Background(), "f", 2, 1, true)
	require.Eventually(t, func() bool { return waiting(s) == 1 }, 5*time.Second, time.Millisecond)

	now.Store(1001)
	s.observe(tp, lsn.Observed(1001, 500))
	s.observe(ts2, lsn.Observed(1001, 499))
	s.observe(ts1, lsn.Observed(1001, 500))
	r := <-res
	require.NoError(t, r.err)
	require.Equal(t, ts1, r.ep, "only s1 reached the write")
	require.Equal(t, "conn@s1:5432", r.conn)
	require.Zero(t, waiting(s))
	require.Equal(t, []lsn.Row{{Endpoint: tp, LSN: 500, Known: true}, {Endpoint: ts1, LSN: 500, Known: true}, {Endpoint: ts2, LSN: 499, Known: true}}, s.stats())
}

func TestSelectorTriesRoutedEndpointsInOrder(t *testing.T) {
	clock, _ := manualClock(1000)
	s := fakeSelector(t, CausalConfig{Clock: clock}, ts1)
	for range 20 {
		_, ep, err := s.acquire(context.Background(), "f", 2, 0, false)
		require.NoError(t, err)
		require.Equal(t, ts2, ep, "s1 refuses connections; s2 must be tried next")
	}
	require.NoError(t, s.setHostgroup(3, []lsn.Endpoint{ts1}))
	_, _, err := s.acquire(context.Background(), "f", 3, 0, false)
	require.ErrorContains(t, err, "s1:5432: connection refused")
	require.ErrorIs(t, s.setHostgroup(4, []lsn.Endpoint{{Host: "x", Port: 1}}), ErrUnknownEndpoint)
}

func TestSelectorCancelAndDisconnect(t *testing.T) {
	clock, _ := manualClock(1000)
	s := fakeSelector(t, CausalConfig{Clock: clock})
	s.executed("f", 1, tp)
	ctx, cancel := context.WithCancel(context.Background())
	res := goAcquire(s, ctx, "f", 2, 1, true)
	require.Eventually(t, func() bool { return waiting(s) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, (<-res).err, context.Canceled)
	require.Zero(t, waiting(s), "a cancelled request stops waiting in the machine")

	res = goAcquire(s, context.Background(), "f", 2, 1, true)
	require.Eventually(t, func() bool { return waiting(s) == 1 }, 5*time.Second, time.Millisecond)
	s.disconnect("f")
	require.ErrorIs(t, (<-res).err, causal.ErrDisconnected)

	s.executed("g", 1, tp)
	res = goAcquire(s, context.Background(), "g", 2, 1, true)
	require.Eventually(t, func() bool { return waiting(s) == 1 }, 5*time.Second, time.Millisecond)
	s.close()
	require.ErrorIs(t, (<-res).err, ErrSelectorClosed)
	_, _, err := s.acquire(context.Background(), "g", 2, 0, false)
	require.ErrorIs(t, err, ErrSelectorClosed)
}

// TestSelectorFailsAtAcquisitionDeadline: with no progress the request fails with the
// machine's WaitError once the ordinary acquisition timeout (or an earlier context deadline)
// has passed, and not before.
func TestSelectorFailsAtAcquisitionDeadline(t *testing.T) {
	s := fakeSelector(t, CausalConfig{AcquireTimeout: 60 * time.Millisecond})
	s.executed("f", 1, tp)
	time.Sleep(2 * time.Millisecond)
	s.observe(tp, lsn.Observed(s.clock(), 900))
	s.observe(ts1, lsn.Observed(s.clock(), 100))
	start := time.Now()
	_, _, err := s.acquire(context.Background(), "f", 2, 1, true)
	waited := time.Since(start)
	var we *causal.WaitError
	require.ErrorAs(t, err, &we)
	require.ErrorIs(t, err, causal.ErrNotReached)
	require.True(t, we.Resolved)
	require.Equal(t, lsn.LSN(900), we.Requirement)
	require.GreaterOrEqual(t, waited, 59*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, _, err = s.acquire(ctx, "f", 2, 1, true)
	require.Error(t, err)
	require.Less(t, time.Since(start), 60*time.Millisecond+time.Second/2, "the earlier context deadline bounds the wait")
}

// TestSelectorMonitorStats: the view's row of each endpoint comes with its retained samples
// (a repeated position replaces the previous sample, an unknown poll withdraws the position
// but keeps the history) and the age of its latest sample.
func TestSelectorMonitorStats(t *testing.T) {
	clock, now := manualClock(1000)
	s := fakeSelector(t, CausalConfig{Clock: clock})
	s.observe(tp, lsn.Observed(1000, 100))
	s.observe(tp, lsn.Observed(1010, 200))
	s.observe(tp, lsn.Observed(1020, 200)) // progress pruning: replaces the sample at 1010
	s.observe(tp, lsn.Observed(1030, 300))
	s.observe(ts1, lsn.Observed(1000, 100))
	s.observe(ts1, lsn.Unknown(1010))
	now.Store(1050)
	rows := s.monitorStats()
	require.Len(t, rows, 2, "endpoints never sampled have no row yet")
	require.Equal(t, tp, rows[0].Endpoint)
	require.True(t, rows[0].Known)
	require.Equal(t, lsn.LSN(300), rows[0].LSN)
	require.Equal(t, 3, rows[0].Samples)
	require.Equal(t, 20*time.Millisecond, rows[0].Age)
	require.Greater(t, rows[0].Bytes, 3*16)
	require.Equal(t, ts1, rows[1].Endpoint)
	require.False(t, rows[1].Known, "an unknown latest poll withdraws the position")
	require.Equal(t, 1, rows[1].Samples, "the history keeps the last known sample")
	require.Equal(t, 40*time.Millisecond, rows[1].Age)
	for i, r := range s.stats() {
		require.Equal(t, r, rows[i].Row, "the same rows as the view")
	}
}

// TestMonitorOnlyEndpointRefusesRequests: an endpoint added without a pool is monitored, and
// a request routed to it fails instead of panicking.
func TestMonitorOnlyEndpointRefusesRequests(t *testing.T) {
	sel := NewCausalSelector(CausalConfig{AcquireTimeout: time.Second})
	defer sel.Close()
	require.NoError(t, sel.AddEndpoint(tp, nil, nil))
	require.NoError(t, sel.SetHostgroup(1, tp))
	sel.Observe(tp, lsn.Observed(1, 42))
	require.Equal(t, []lsn.Row{{Endpoint: tp, LSN: 42, Known: true}}, sel.Stats())
	_, err := sel.Frontend("f").Acquire(context.Background(), 1)
	require.ErrorIs(t, err, ErrUnknownEndpoint)
	require.ErrorContains(t, err, "monitored only")
}
