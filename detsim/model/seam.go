package model

import (
	"context"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// StoreSeam serves a Store through the adapters seams (ShardMapStore and BlobStore), with a
// lock and a blocking Watch, so the model runs the same contract suite as the real stores
// (conformance.RunStoreSuite). Every answer comes from the Store's own methods.
type StoreSeam struct {
	mu     sync.Mutex
	st     *Store
	wake   chan struct{}
	closed bool
}

var (
	_ adapters.ShardMapStore = (*StoreSeam)(nil)
	_ adapters.BlobStore     = (*StoreSeam)(nil)
)

// NewStoreSeam serves st; st must not be used by anything else while served.
func NewStoreSeam(st *Store) *StoreSeam { return &StoreSeam{st: st, wake: make(chan struct{})} }

// Close makes every later call fail with adapters.ErrClosed and wakes every Watch.
func (ss *StoreSeam) Close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.closed {
		ss.closed = true
		close(ss.wake)
	}
	return nil
}

func (ss *StoreSeam) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return adapters.ErrClosed
	}
	return nil
}

// Read implements adapters.ShardMapStore.
func (ss *StoreSeam) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	if err := ss.enter(ctx); err != nil {
		return nil, err
	}
	defer ss.mu.Unlock()
	return ss.st.Read(db)
}

// CAS implements adapters.ShardMapStore.
func (ss *StoreSeam) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ss.enter(ctx); err != nil {
		return 0, err
	}
	defer ss.mu.Unlock()
	v, err := ss.st.CAS(db, expect, next)
	if err == nil {
		close(ss.wake)
		ss.wake = make(chan struct{})
	}
	return v, err
}

// Watch implements adapters.ShardMapStore with the Store's own Watch: it registers, and
// waits for the write that satisfies it or for ctx.
func (ss *StoreSeam) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	if err := ss.enter(ctx); err != nil {
		return nil, err
	}
	got := make(chan *shardmap.Record, 1)
	cancel := ss.st.Watch(db, after, func(r *shardmap.Record) { got <- r })
	ss.mu.Unlock()
	for {
		ss.mu.Lock()
		closed, wake := ss.closed, ss.wake
		ss.mu.Unlock()
		if closed {
			return nil, adapters.ErrClosed
		}
		select {
		case r := <-got:
			return r, nil
		case <-ctx.Done():
			ss.mu.Lock()
			cancel()
			ss.mu.Unlock()
			select {
			case r := <-got: // the write won the race with the cancellation
				return r, nil
			default:
			}
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// GetBlob implements adapters.BlobStore.
func (ss *StoreSeam) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if err := ss.enter(ctx); err != nil {
		return adapters.Blob{}, err
	}
	defer ss.mu.Unlock()
	return ss.st.GetBlob(key)
}

// PutBlob implements adapters.BlobStore.
func (ss *StoreSeam) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := ss.enter(ctx); err != nil {
		return 0, err
	}
	defer ss.mu.Unlock()
	return ss.st.PutBlob(key, expect, data)
}

// DeleteBlob implements adapters.BlobStore.
func (ss *StoreSeam) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	if err := ss.enter(ctx); err != nil {
		return err
	}
	defer ss.mu.Unlock()
	return ss.st.DeleteBlob(key, expect)
}

// ListBlobs implements adapters.BlobStore.
func (ss *StoreSeam) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	if err := ss.enter(ctx); err != nil {
		return nil, err
	}
	defer ss.mu.Unlock()
	return ss.st.ListBlobs(prefix), nil
}

// BackendSeam serves a Backend through adapters.ShardBackend, with a lock, so the model runs
// the backend contract suite (conformance.RunBackendSuite) as the Postgres adapter does.
type BackendSeam struct {
	mu *sync.Mutex
	b  *Backend
}

var _ adapters.ShardBackend = BackendSeam{}

// NewBackendSeam serves b; mu guards b for everything else that touches it.
func NewBackendSeam(b *Backend, mu *sync.Mutex) BackendSeam { return BackendSeam{mu: mu, b: b} }

func (bs BackendSeam) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bs.mu.Lock()
	return nil
}

// Status implements adapters.ShardBackend.
func (bs BackendSeam) Status(ctx context.Context) (adapters.BackendStatus, error) {
	if err := bs.enter(ctx); err != nil {
		return adapters.BackendStatus{}, err
	}
	defer bs.mu.Unlock()
	return bs.b.Status(), nil
}

// FenceWrites implements adapters.ShardBackend.
func (bs BackendSeam) FenceWrites(ctx context.Context, role string) error {
	if err := bs.enter(ctx); err != nil {
		return err
	}
	defer bs.mu.Unlock()
	return bs.b.FenceWrites(role)
}

// UnfenceWrites implements adapters.ShardBackend.
func (bs BackendSeam) UnfenceWrites(ctx context.Context, role string) error {
	if err := bs.enter(ctx); err != nil {
		return err
	}
	defer bs.mu.Unlock()
	return bs.b.UnfenceWrites(role)
}

// Prepared implements adapters.ShardBackend.
func (bs BackendSeam) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) {
	if err := bs.enter(ctx); err != nil {
		return nil, err
	}
	defer bs.mu.Unlock()
	return bs.b.Prepared(), nil
}

// Checksum implements adapters.ShardBackend.
func (bs BackendSeam) Checksum(ctx context.Context, table string, by adapters.ShardFn) (adapters.TableDigest, error) {
	if err := bs.enter(ctx); err != nil {
		return adapters.TableDigest{}, err
	}
	defer bs.mu.Unlock()
	return bs.b.Checksum(table, by)
}
