package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Campaign implements adapters.LeaseStore. It grants an etcd lease of ttl (rounded up to
// whole seconds; etcd may raise it to its minimum) and creates the lease blob attached to
// it, if no one holds it; otherwise it watches the blob until etcd deletes it (its holder's
// lease expired or was revoked) and tries again. The tenure's epoch is the revision of
// that create. A cluster that does not answer (no quorum) ends the campaign with an error
// matching adapters.ErrUnreachable, so the caller can say so and try again.
func (s *Store) Campaign(ctx context.Context, key string, ttl time.Duration, value []byte) (adapters.Tenure, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return nil, err
	}
	secs := max(int64(math.Ceil(ttl.Seconds())), 1)
	k := s.blobKey(key)
	for {
		if err := s.begin(ctx); err != nil {
			return nil, err
		}
		t, rev, err := s.tryTake(ctx, key, k, secs, value)
		switch {
		case t != nil:
			return t, nil
		case err == nil:
			err = s.waitGone(ctx, k, rev)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if s.closed.Load() {
				return nil, adapters.ErrClosed
			}
			return nil, err // ErrUnreachable (no quorum, no answer): the caller retries
		}
	}
}

// tryTake grants a lease and creates the blob on it if the blob is missing. It returns the
// tenure, or (nil, revision of the read) when another holds it.
func (s *Store) tryTake(ctx context.Context, key, k string, secs int64, value []byte) (*tenure, int64, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	sent := time.Now()
	g, err := s.cl.Grant(cctx, secs)
	if err != nil {
		return nil, 0, s.mapErr(ctx, "grant a lease for "+key, err)
	}
	tr, err := s.cl.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, string(value), clientv3.WithLease(g.ID))).Else(clientv3.OpGet(k, clientv3.WithKeysOnly())).Commit()
	if err != nil || !tr.Succeeded {
		// Not ours: give the grant back now rather than let it linger for a TTL.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		_, _ = s.cl.Revoke(rctx, g.ID)
		rcancel()
		if err != nil {
			return nil, 0, s.mapErr(ctx, "take the lease "+key, err)
		}
		return nil, tr.Header.Revision, nil
	}
	ttl := time.Duration(g.TTL) * time.Second
	t := &tenure{s: s, id: g.ID, key: key, f: fence{key: k, epoch: tr.Header.Revision}, ttl: ttl, done: make(chan struct{})}
	t.validUntil = sent.Add(ttl - t.margin())
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t.stop = stop
	go t.keepAlive(lctx)
	return t, 0, nil
}

// waitGone waits, on etcd's watch from the revision after rev, until the lease blob is
// deleted; it returns nil then, or when the watch broke (the caller tries again).
func (s *Store) waitGone(ctx context.Context, k string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cl.Watch(wctx, k, clientv3.WithRev(rev+1)) {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}

// tenure is one holding of the lease: an etcd lease this process renews.
type tenure struct {
	s    *Store
	id   clientv3.LeaseID
	key  string
	f    fence
	ttl  time.Duration
	stop context.CancelFunc
	done chan struct{}

	mu         sync.Mutex
	validUntil time.Time
	err        error
}

var _ adapters.Tenure = (*tenure)(nil)

// margin is how early this process stops believing it holds the lease, for clock-rate
// error between it and etcd's leader.
func (t *tenure) margin() time.Duration { return t.ttl / 10 }

func (t *tenure) Epoch() uint64 { return uint64(t.f.epoch) }

func (t *tenure) ValidUntil() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.validUntil
}

func (t *tenure) Done() <-chan struct{} { return t.done }

func (t *tenure) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// end ends the tenure once, with why.
func (t *tenure) end(why error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	t.err = why
	t.validUntil = time.Time{}
	t.stop()
	close(t.done)
}

// keepAlive renews the lease every TTL/3 with one KeepAliveOnce each, timing validity from
// the moment each renewal was sent (the client's streaming KeepAlive does not say when the
// request it answers left). It ends the tenure when etcd says the lease is gone, or when
// ValidUntil passes without an acknowledged renewal (etcd unreachable or without quorum;
// a process paused past its TTL finds this on waking, before it sends anything).
func (t *tenure) keepAlive(ctx context.Context) {
	every, retry := t.ttl/3, max(t.ttl/20, 10*time.Millisecond)
	next := every
	for {
		until := t.ValidUntil()
		wait := min(next, time.Until(until))
		tm := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		if !time.Now().Before(until) {
			t.end(fmt.Errorf("etcdstore: lease %s (revision %d): no renewal acknowledged within its TTL %v (is a quorum of etcd members reachable?)", t.key, t.f.epoch, t.ttl))
			return
		}
		sent := time.Now()
		cctx, cancel := context.WithDeadline(ctx, until)
		resp, err := t.s.cl.KeepAliveOnce(cctx, t.id)
		cancel()
		switch {
		case err == nil && resp.TTL > 0:
			t.mu.Lock()
			if t.err == nil {
				t.validUntil = sent.Add(time.Duration(resp.TTL)*time.Second - t.margin())
			}
			t.mu.Unlock()
			next = every
		case err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound):
			t.end(fmt.Errorf("etcdstore: lease %s (revision %d): etcd expired it", t.key, t.f.epoch))
			return
		case ctx.Err() != nil:
			return
		default:
			next = retry
		}
	}
}

// Release revokes the etcd lease, which deletes the lease blob at once.
func (t *tenure) Release(ctx context.Context) error {
	t.end(errors.New("etcdstore: released"))
	if err := t.s.begin(ctx); err != nil {
		return err
	}
	cctx, cancel := t.s.call(ctx)
	defer cancel()
	_, err := t.s.cl.Revoke(cctx, t.id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return t.s.mapErr(ctx, "release the lease "+t.key, err)
	}
	return nil
}

// Fenced implements adapters.Tenure.
func (t *tenure) Fenced() interface {
	adapters.ShardMapStore
	adapters.BlobStore
} {
	return fenced{t}
}

// fenced is the store seen through a tenure: each write is one transaction that also
// requires the lease blob to be the one this tenure created.
type fenced struct{ t *tenure }

func (f fenced) refuseEnded(key string) error {
	if key == f.t.key {
		return fmt.Errorf("etcdstore: blob %q is the lease itself; a tenure does not write it (renewals keep it)", key)
	}
	select {
	case <-f.t.done:
		return fmt.Errorf("etcdstore: %w: %v", adapters.ErrLeaseLost, f.t.Err())
	default:
		return nil
	}
}

func (f fenced) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	return f.t.s.Read(ctx, db)
}

func (f fenced) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	return f.t.s.Watch(ctx, db, after)
}

func (f fenced) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := f.refuseEnded(""); err != nil {
		return 0, err
	}
	return f.t.s.cas(ctx, db, expect, next, &f.t.f)
}

func (f fenced) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	return f.t.s.GetBlob(ctx, key)
}

func (f fenced) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	return f.t.s.ListBlobs(ctx, prefix)
}

func (f fenced) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := f.refuseEnded(key); err != nil {
		return 0, err
	}
	return f.t.s.putBlob(ctx, key, expect, data, &f.t.f)
}

func (f fenced) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	if err := f.refuseEnded(key); err != nil {
		return err
	}
	return f.t.s.deleteBlob(ctx, key, expect, &f.t.f)
}
