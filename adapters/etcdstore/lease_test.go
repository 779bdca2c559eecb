package etcdstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/etcdtest"
)

func openOn(t *testing.T, c *etcdtest.Cluster, prefix string) *Store {
	s, err := Open(Options{Endpoints: c.Endpoints(), Prefix: prefix, Timeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var leaseDB = adapters.DBRef{Namespace: "ns", Database: "app"}

// TestLeaseFencesDeposedWrites: a tenure whose etcd lease has ended (here revoked behind
// its back, as etcd does on expiry) has its writes refused by etcd itself, even though
// this process has not noticed yet; once another holder campaigns and wins, the old
// tenure's writes still fail and name the new revision, and nothing they carried is
// stored. The new holder's writes pass.
func TestLeaseFencesDeposedWrites(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a, b := openOn(t, c, "fence/"), openOn(t, c, "fence/")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ta, err := a.Campaign(ctx, "lease/controller", 2*time.Second, []byte("a"))
	require.NoError(t, err)
	old := ta.(*tenure)
	fa := old.Fenced()
	v, err := fa.CAS(ctx, leaseDB, 0, conformance.SampleRecord("app", 1))
	require.NoError(t, err)
	require.Equal(t, uint64(1), v)
	bv, err := fa.PutBlob(ctx, "snap/x", 0, []byte("a1"))
	require.NoError(t, err)
	lb, err := b.GetBlob(ctx, "lease/controller")
	require.NoError(t, err)
	require.Equal(t, ta.Epoch(), lb.Version, "the epoch is the lease blob's version")
	require.Equal(t, "a", string(lb.Data))
	_, err = fa.PutBlob(ctx, "lease/controller", lb.Version, []byte("x"))
	require.ErrorContains(t, err, "is the lease itself")

	// etcd ends the lease; the tenure's keepalive has not looked yet.
	old.stop()
	_, err = a.cl.Revoke(ctx, old.id)
	require.NoError(t, err)
	_, err = a.cas(ctx, leaseDB, 1, conformance.SampleRecord("app", 2), &old.f)
	require.ErrorIs(t, err, adapters.ErrLeaseLost)
	require.ErrorContains(t, err, "gone")
	_, err = a.putBlob(ctx, "snap/x", bv, []byte("a2"), &old.f)
	require.ErrorIs(t, err, adapters.ErrLeaseLost)
	require.ErrorIs(t, a.deleteBlob(ctx, "snap/x", bv, &old.f), adapters.ErrLeaseLost)

	tb, err := b.Campaign(ctx, "lease/controller", 2*time.Second, []byte("b"))
	require.NoError(t, err)
	defer tb.Release(context.Background())
	require.Greater(t, tb.Epoch(), ta.Epoch())
	_, err = a.cas(ctx, leaseDB, 1, conformance.SampleRecord("app", 2), &old.f)
	require.ErrorIs(t, err, adapters.ErrLeaseLost)
	require.ErrorContains(t, err, "at revision")

	r, err := b.Read(ctx, leaseDB)
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Version, "a refused CAS stored nothing")
	got, err := b.GetBlob(ctx, "snap/x")
	require.NoError(t, err)
	require.Equal(t, "a1", string(got.Data), "a refused put stored nothing")

	fb := tb.Fenced()
	_, err = fb.CAS(ctx, leaseDB, 1, conformance.SampleRecord("app", 2))
	require.NoError(t, err)
	_, err = fb.PutBlob(ctx, "snap/x", got.Version, []byte("b1"))
	require.NoError(t, err)
	// A fenced write that loses on the record's own version is a conflict, not a lost lease.
	_, err = fb.CAS(ctx, leaseDB, 1, conformance.SampleRecord("app", 3))
	var ce *adapters.ConflictError
	require.ErrorAs(t, err, &ce)
}

// TestLeaseExpiresOnEtcdsClock: a holder that stops renewing (its keepalive stopped, as
// in a paused process) keeps the lease until etcd expires it; then a waiting standby's
// Campaign returns, woken by the watch on the blob's deletion. A Release hands over at
// once.
func TestLeaseExpiresOnEtcdsClock(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := openOn(t, c, "expiry/"), openOn(t, c, "expiry/")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ta, err := a.Campaign(ctx, "lease/controller", 4*time.Second, []byte("a"))
	require.NoError(t, err)
	won := make(chan adapters.Tenure, 1)
	go func() {
		tb, err := b.Campaign(ctx, "lease/controller", 2*time.Second, []byte("b"))
		if err == nil {
			won <- tb
		}
		close(won)
	}()
	// While a renews (every TTL/3), b waits, past one TTL.
	select {
	case <-won:
		t.Fatal("the standby took a lease its holder was renewing")
	case <-time.After(5 * time.Second):
	}
	require.True(t, time.Now().Before(ta.ValidUntil()))
	ta.(*tenure).stop() // stop renewing, without telling etcd
	tb, ok := <-won
	require.True(t, ok, "the standby never took the expired lease")
	require.Greater(t, tb.Epoch(), ta.Epoch())

	// Release: the next campaign need not wait for expiry.
	again := make(chan adapters.Tenure, 1)
	go func() {
		tc, err := a.Campaign(ctx, "lease/controller", 30*time.Second, []byte("a2"))
		if err == nil {
			again <- tc
		}
	}()
	require.NoError(t, tb.Release(ctx))
	<-tb.Done()
	select {
	case tc := <-again:
		require.Greater(t, tc.Epoch(), tb.Epoch())
		require.NoError(t, tc.Release(ctx))
	case <-time.After(20 * time.Second):
		t.Fatal("a released lease was not taken before its 30s TTL could matter")
	}
}

// TestTenureEndsWithoutQuorum: with two of three members stopped, renewals go
// unacknowledged and the tenure ends locally by ValidUntil, saying why; fenced writes are
// refused before they are sent.
func TestTenureEndsWithoutQuorum(t *testing.T) {
	c := etcdtest.Start(t, 3)
	a := openOn(t, c, "quorum/")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ta, err := a.Campaign(ctx, "lease/controller", 2*time.Second, []byte("a"))
	require.NoError(t, err)
	c.Members[0].Stop()
	c.Members[1].Stop()
	select {
	case <-ta.Done():
	case <-ctx.Done():
		t.Fatal("the tenure outlived quorum")
	}
	require.ErrorContains(t, ta.Err(), "no renewal acknowledged")
	_, err = ta.Fenced().PutBlob(ctx, "snap/y", 0, nil)
	require.ErrorIs(t, err, adapters.ErrLeaseLost)
	require.True(t, ta.ValidUntil().IsZero())
}
