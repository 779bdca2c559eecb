package driver_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/etcdstore"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/etcdtest"
	"loam.dev/router/driver"
)

type recordingExec struct{ ran []string }

func (r *recordingExec) Execute(_ context.Context, c string) (string, bool) {
	r.ran = append(r.ran, c)
	return "done", true
}

// TestLeaseOnEtcdFencesInTheStore: on etcd the lease is etcd's. The lease blob is deleted
// behind the holder's back (the holder's etcd lease still renews, so by its own reckoning
// it still leads): every guarded write it makes is refused by etcd in the same
// transaction, as ErrNotLeader, and stores nothing; a command whose exec entry is refused
// is not executed. The standby, woken by the deletion, takes over and its writes pass.
func TestLeaseOnEtcdFencesInTheStore(t *testing.T) {
	c := etcdtest.Start(t, 3)
	open := func() *etcdstore.Store {
		s, err := etcdstore.Open(etcdstore.Options{Endpoints: c.Endpoints(), Prefix: "driver/", Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	sa, sb := open(), open()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A long TTL: the holder must not see its tenure end by a late renewal on a loaded
	// machine before the test deletes the key, so only etcd can refuse its writes.
	a, err := driver.NewLease(sa, driver.LeaseOptions{Holder: "a", TTL: 30 * time.Second, Logger: log})
	require.NoError(t, err)
	b, err := driver.NewLease(sb, driver.LeaseOptions{Holder: "b", TTL: 30 * time.Second, Logger: log})
	require.NoError(t, err)
	require.True(t, a.Native(), "an etcd store keeps the lease itself")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	ta, err := a.Acquire(ctx)
	require.NoError(t, err)
	holdCtx, stopHold := context.WithCancel(ctx)
	defer stopHold()
	held := make(chan error, 1)
	go func() { held <- a.Hold(holdCtx) }()
	bTook := make(chan driver.Token, 1)
	go func() {
		if tok, err := b.Acquire(ctx); err == nil {
			bTook <- tok
		}
	}()

	ga := driver.GuardedStore{Store: sa, Lease: a}
	db := adapters.DBRef{Namespace: "ns", Database: "app"}
	_, err = ga.CAS(ctx, db, 0, conformance.SampleRecord("app", 1))
	require.NoError(t, err)
	auditA := driver.NewAudit(ga, func() driver.Token { tok, _ := a.Valid(); return tok }, log)
	exec := &recordingExec{}
	run := &driver.Audited[string, string]{Kind: "test", ID: "app", Next: exec, Audit: auditA, Valid: a.Valid}
	_, ok := run.Execute(ctx, "before")
	require.True(t, ok)

	lb, err := sa.GetBlob(ctx, driver.DefaultLeaseKey)
	require.NoError(t, err)
	require.Equal(t, ta.Epoch, lb.Version)
	_, err = c.Client(t).Delete(ctx, etcdstore.PrefixOf(sa)+"xb/"+driver.DefaultLeaseKey)
	require.NoError(t, err)
	_, stillValid := a.Valid()
	require.True(t, stillValid, "the holder has not noticed: only etcd can refuse now")

	_, err = ga.CAS(ctx, db, 1, conformance.SampleRecord("app", 2))
	require.ErrorIs(t, err, driver.ErrNotLeader)
	require.ErrorIs(t, err, adapters.ErrLeaseLost)
	_, err = ga.PutBlob(ctx, "snap/x", 0, []byte("late"))
	require.ErrorIs(t, err, driver.ErrNotLeader)
	ectx, ecancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, ok = run.Execute(ectx, "after")
	ecancel()
	require.False(t, ok)
	require.Equal(t, []string{"before"}, exec.ran, "a command whose exec entry etcd refused must not run")
	r, err := sa.Read(ctx, db)
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Version)
	_, err = sa.GetBlob(ctx, "snap/x")
	require.ErrorIs(t, err, adapters.ErrNotFound)

	var tb driver.Token
	select {
	case tb = <-bTook:
	case <-ctx.Done():
		t.Fatal("the standby did not take the deleted lease")
	}
	require.Greater(t, tb.Epoch, ta.Epoch)
	gb := driver.GuardedStore{Store: sb, Lease: b}
	_, err = gb.CAS(ctx, db, 1, conformance.SampleRecord("app", 2))
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx))
	_, err = gb.PutBlob(ctx, "snap/x", 0, nil)
	require.ErrorIs(t, err, driver.ErrNotLeader, "a released lease guards nothing")
	stopHold()
	<-held
}

// TestLeaseOnEtcdLostWhenRenewalStops: the holder's Hold returns ErrNotLeader once etcd
// expired its lease (here: every member but one stopped, so no renewal commits).
func TestLeaseOnEtcdLostWithoutQuorum(t *testing.T) {
	c := etcdtest.Start(t, 3)
	s, err := etcdstore.Open(etcdstore.Options{Endpoints: c.Endpoints(), Timeout: 2 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	l, err := driver.NewLease(s, driver.LeaseOptions{Holder: "a", TTL: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, err = l.Acquire(ctx)
	require.NoError(t, err)
	c.Members[0].Stop()
	c.Members[1].Stop()
	err = l.Hold(ctx)
	require.ErrorIs(t, err, driver.ErrNotLeader)
	require.ErrorContains(t, err, "quorum")
	_, ok := l.Valid()
	require.False(t, ok)
	<-l.Lost()
}
