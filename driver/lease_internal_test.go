package driver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func newTestLease(t *testing.T, s adapters.BlobStore, holder string, ttl time.Duration, skipExpiry bool) *Lease {
	t.Helper()
	l, err := NewLease(s, LeaseOptions{Holder: holder, TTL: ttl, Logger: quietLog, skipExpiry: skipExpiry})
	require.NoError(t, err)
	return l
}

// overlap runs two controllers on one store for d and reports whether both ever held a
// valid lease at the same instant, and how many times the lease changed hands. Each
// controller acquires, holds for a random while, then stops renewing without releasing, as
// a killed process would, and comes back as a standby.
func overlap(t *testing.T, skipExpiry bool, d time.Duration) (bool, int) {
	store := memstore.New()
	const ttl = 60 * time.Millisecond
	a := newTestLease(t, store, "a", ttl, skipExpiry)
	b := newTestLease(t, store, "b", ttl, skipExpiry)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var takes atomic.Int32
	for i, l := range []*Lease{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				if _, err := l.Acquire(ctx); err != nil {
					return
				}
				takes.Add(1)
				hctx, crash := context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(3*ttl))))
				_ = l.Hold(hctx)
				crash()
			}
		}()
	}
	var both atomic.Bool
	for ctx.Err() == nil {
		_, va := a.Valid()
		_, vb := b.Valid()
		if va && vb {
			both.Store(true)
		}
		time.Sleep(200 * time.Microsecond)
	}
	wg.Wait()
	return both.Load(), int(takes.Load()) - 1
}

// TestLeaseAtMostOneHolder: two controllers that crash and come back for a second are never
// both valid.
// The mutant that takes a held lease without waiting for it to expire is caught by the
// same check, so the check is not vacuous.
func TestLeaseAtMostOneHolder(t *testing.T) {
	both, handovers := overlap(t, false, time.Second)
	require.False(t, both, "two controllers held the lease at once")
	require.GreaterOrEqual(t, handovers, 3, "the run must include takeovers to check anything")
	both, _ = overlap(t, true, time.Second)
	require.True(t, both, "mutant skipExpiry: the overlap check must trip")
}

// TestLeaseTakeoverAfterCrash: a holder that stops renewing (killed) is replaced after one
// TTL and not before; its own validity ended before the standby's tenure began; the new
// epoch is greater.
// The TTL is a second, not less: with 100 ms a holder's renewal starved for 70 ms on a loaded
// CI machine let the standby take the lease legitimately (the holder had stopped being
// valid), and the test read that as a takeover of a renewed lease. The upper bound on the
// takeover is as loose (a standby starved of CPU polls late), so it checks liveness only.
func TestLeaseTakeoverAfterCrash(t *testing.T) {
	store := memstore.New()
	const ttl = time.Second
	a := newTestLease(t, store, "a", ttl, false)
	b := newTestLease(t, store, "b", ttl, false)
	ta, err := a.Acquire(t.Context())
	require.NoError(t, err)
	holdCtx, crash := context.WithCancel(t.Context())
	go func() { _ = a.Hold(holdCtx) }()

	got := make(chan Token, 1)
	go func() { tok, _ := b.Acquire(t.Context()); got <- tok }()
	select {
	case <-got:
		t.Fatal("the standby took a lease that was being renewed")
	case <-time.After(3 * ttl):
	}
	crash() // a stops renewing, as a SIGKILLed process
	crashed := time.Now()
	tb := <-got
	took := time.Since(crashed)
	_, aValid := a.Valid()
	require.False(t, aValid, "the old holder still believed it held the lease when the standby took it")
	require.Greater(t, tb.Epoch, ta.Epoch)
	require.Equal(t, "b", tb.Holder)
	require.Less(t, took, 5*ttl, "takeover about one TTL after the last renewal (plus a poll; loose for a loaded machine)")
}

// TestLeaseReleaseHandsOverAtOnce: a graceful stop releases, and the standby does not wait.
func TestLeaseReleaseHandsOverAtOnce(t *testing.T) {
	store := memstore.New()
	const ttl = time.Second
	a := newTestLease(t, store, "a", ttl, false)
	b := newTestLease(t, store, "b", ttl, false)
	_, err := a.Acquire(t.Context())
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() { _, _ = b.Acquire(t.Context()); got <- time.Now() }()
	time.Sleep(50 * time.Millisecond)
	released := time.Now()
	require.NoError(t, a.Release(t.Context()))
	at := <-got
	require.Less(t, at.Sub(released), ttl/4)
	_, ok := a.Valid()
	require.False(t, ok)
}

// TestLeaseLostOnConflict: a holder whose renewal conflicts (another controller wrote the
// lease) stops at once, closes Lost, and its guarded writes are refused.
func TestLeaseLostOnConflict(t *testing.T) {
	store := memstore.New()
	a := newTestLease(t, store, "a", 90*time.Millisecond, false)
	_, err := a.Acquire(t.Context())
	require.NoError(t, err)
	g := GuardedStore{Store: store, Lease: a}
	_, err = g.PutBlob(t.Context(), "machine/x/y", 0, []byte("s"))
	require.NoError(t, err, "the holder's writes pass")
	vs, err := g.PutBlobs(t.Context(), []adapters.BlobPut{{Key: "machine/x/z", Data: []byte("s")}, {Key: "audit/1/a", Data: []byte("e")}})
	require.NoError(t, err, "the holder's batches pass, in one transaction of the store")
	require.Len(t, vs, 2)
	_, err = GuardedStore{Store: unbatched{store}, Lease: a}.PutBlobs(t.Context(), []adapters.BlobPut{{Key: "audit/1/b"}})
	require.ErrorIs(t, err, errors.ErrUnsupported, "a store that writes one blob at a time cannot batch through the guard")

	b, err := store.GetBlob(t.Context(), DefaultLeaseKey)
	require.NoError(t, err)
	_, err = store.PutBlob(t.Context(), DefaultLeaseKey, b.Version, []byte(`{"holder":"intruder","ttl_ms":90}`))
	require.NoError(t, err)
	err = a.Hold(t.Context())
	require.ErrorIs(t, err, ErrNotLeader)
	select {
	case <-a.Lost():
	default:
		t.Fatal("Lost not closed")
	}
	_, err = g.PutBlob(t.Context(), "machine/x/y", 1, []byte("s2"))
	require.ErrorIs(t, err, ErrNotLeader, "a deposed controller's step is refused")
	_, err = g.PutBlobs(t.Context(), []adapters.BlobPut{{Key: "machine/x/z", Expect: vs[0], Data: []byte("s2")}, {Key: "audit/1/c", Data: []byte("e")}})
	require.ErrorIs(t, err, ErrNotLeader, "a deposed controller's batch is refused")
	_, err = store.GetBlob(t.Context(), "audit/1/c")
	require.ErrorIs(t, err, adapters.ErrNotFound, "and nothing of it written")
	_, err = g.CAS(t.Context(), adapters.DBRef{Namespace: "ns", Database: "app"}, 0, nil)
	require.ErrorIs(t, err, ErrNotLeader)
}

// TestLeaseStoreDownEndsTenure: a holder that cannot reach the store is no longer valid
// once one TTL has passed since its last successful write (before any standby could take
// over), and Hold reports the loss.
func TestLeaseStoreDownEndsTenure(t *testing.T) {
	store := &flaky{Store: memstore.New()}
	const ttl = 80 * time.Millisecond
	a := newTestLease(t, store, "a", ttl, false)
	sent := time.Now()
	_, err := a.Acquire(t.Context())
	require.NoError(t, err)
	store.down.Store(true)
	held := make(chan error, 1)
	go func() { held <- a.Hold(t.Context()) }()
	time.Sleep(time.Until(sent.Add(ttl)))
	_, ok := a.Valid()
	require.False(t, ok, "still valid one TTL after the last write")
	select {
	case err := <-held:
		require.ErrorIs(t, err, ErrNotLeader)
	case <-time.After(2 * time.Second):
		t.Fatal("Hold did not report the lost lease")
	}
}

// unbatched is a store that writes one blob at a time (its BlobBatcher hidden).
type unbatched struct{ guardedBackend }

// TestSameStore: Run writes a step's snapshot and exec entries in one transaction only when
// both go to one store: the same one, or a GuardedStore over the other.
func TestSameStore(t *testing.T) {
	a, b := memstore.New(), memstore.New()
	g := GuardedStore{Store: a}
	require.True(t, sameStore(a, a))
	require.True(t, sameStore(g, a))
	require.True(t, sameStore(a, g))
	require.True(t, sameStore(g, GuardedStore{Store: a}))
	require.False(t, sameStore(a, b))
	require.False(t, sameStore(g, b))
	require.False(t, sameStore(unbatched{a}, a), "a wrapper is another store")
	require.False(t, sameStore(sliceStore{a, nil}, sliceStore{a, nil}), "an incomparable store is never the same (and does not panic)")
	require.False(t, sameStore(nil, a))
}

type sliceStore struct {
	*memstore.Store
	tags []string
}

type flaky struct {
	*memstore.Store
	down atomic.Bool
}

func (f *flaky) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if f.down.Load() {
		return 0, errors.Join(adapters.ErrUnreachable, errors.New("store down"))
	}
	return f.Store.PutBlob(ctx, key, expect, data)
}

// TestLeaseMaxTTL: a lease blob written with a ten-year TTL (by a buggy or hostile writer)
// holds a standby off for MaxTTL at most, not ten years; CheckLeaseBlob refuses it.
func TestLeaseMaxTTL(t *testing.T) {
	st := memstore.New()
	evil := []byte(`{"holder":"mallory","ttl_ms":315360000000}`)
	require.ErrorContains(t, CheckLeaseBlob(evil, time.Minute), "outside (0, 1m0s]")
	require.NoError(t, CheckLeaseBlob([]byte(`{"holder":"a","ttl_ms":10000}`), time.Minute))
	_, err := st.PutBlob(t.Context(), DefaultLeaseKey, 0, evil)
	require.NoError(t, err)
	l, err := NewLease(st, LeaseOptions{Holder: "b", TTL: 50 * time.Millisecond, MaxTTL: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tok, err := l.Acquire(ctx)
	require.NoError(t, err, "the ten-year lease was believed")
	require.Equal(t, "b", tok.Holder)
}

// silentStore never answers: every call waits for its context.
type silentStore struct{ adapters.BlobStore }

func (silentStore) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	<-ctx.Done()
	return adapters.Blob{}, ctx.Err()
}

func (silentStore) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestLeaseCallsHaveDeadlines: a holder whose store accepts a renewal and never answers
// loses the lease at its tenure's end (the renewal's deadline), instead of waiting on the
// call while it may no longer hold the lease.
func TestLeaseCallsHaveDeadlines(t *testing.T) {
	st := memstore.New()
	sw := &switchable{BlobStore: st}
	l, err := NewLease(sw, LeaseOptions{Holder: "a", TTL: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	_, err = l.Acquire(t.Context())
	require.NoError(t, err)
	sw.silent.Store(true)
	done := make(chan error, 1)
	go func() { done <- l.Hold(context.Background()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNotLeader)
	case <-time.After(30 * time.Second):
		t.Fatal("Hold waited on a store that never answers")
	}
}

// switchable is a store that turns silent when told.
type switchable struct {
	adapters.BlobStore
	silent atomic.Bool
}

func (s *switchable) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if s.silent.Load() {
		return silentStore{}.PutBlob(ctx, key, expect, data)
	}
	return s.BlobStore.PutBlob(ctx, key, expect, data)
}
