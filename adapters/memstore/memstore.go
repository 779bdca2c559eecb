// Package memstore is an in-memory ShardMapStore and BlobStore, for tests and for embedding
// Loam Router where durability lives elsewhere. It keeps records in their binary encoding,
// so nothing a caller holds aliases what is stored, exactly as with a real store.
package memstore

import (
	"context"
	"slices"
	"strings"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Store is safe for concurrent use. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	records map[adapters.DBRef][]byte
	blobs   map[string]adapters.Blob
	seq     uint64        // blob version counter: never reused
	changed chan struct{} // closed and replaced on every write, to wake watchers
	closed  bool
}

var (
	_ adapters.ShardMapStore = (*Store)(nil)
	_ adapters.BlobStore     = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{records: map[adapters.DBRef][]byte{}, blobs: map[string]adapters.Blob{}, changed: make(chan struct{})}
}

// Close makes every later call fail with adapters.ErrClosed and wakes every Watch.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.changed)
	}
	return nil
}

func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Store) readLocked(db adapters.DBRef) (*shardmap.Record, error) {
	b, ok := s.records[db]
	if !ok {
		return nil, nil
	}
	return shardmap.Decode(b)
}

// Read implements adapters.ShardMapStore.
func (s *Store) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, adapters.ErrClosed
	}
	r, err := s.readLocked(db)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, adapters.ErrNotFound
	}
	return r, nil
}

// CAS implements adapters.ShardMapStore.
func (s *Store) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, adapters.ErrClosed
	}
	cur, err := s.readLocked(db)
	if err != nil {
		return 0, err
	}
	b, version, err := adapters.EncodeCAS(db, expect, cur, next)
	if err != nil {
		return 0, err
	}
	s.records[db] = b
	s.notifyLocked()
	return version, nil
}

// Watch implements adapters.ShardMapStore without polling: every write wakes it.
func (s *Store) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, adapters.ErrClosed
		}
		r, err := s.readLocked(db)
		wake := s.changed
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if r != nil && r.Version > after {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// GetBlob implements adapters.BlobStore.
func (s *Store) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return adapters.Blob{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return adapters.Blob{}, adapters.ErrClosed
	}
	b, ok := s.blobs[key]
	if !ok {
		return adapters.Blob{}, adapters.ErrNotFound
	}
	b.Data = slices.Clone(b.Data)
	return b, nil
}

// PutBlob implements adapters.BlobStore.
func (s *Store) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, adapters.ErrClosed
	}
	if cur := s.blobs[key].Version; cur != expect {
		return 0, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	s.seq++
	s.blobs[key] = adapters.Blob{Key: key, Version: s.seq, Data: slices.Clone(data)}
	s.notifyLocked()
	return s.seq, nil
}

// PutBlobs implements adapters.BlobBatcher: every put under one lock, or none.
func (s *Store) PutBlobs(ctx context.Context, puts []adapters.BlobPut) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, adapters.ErrClosed
	}
	if err := adapters.CheckBlobPuts(puts, func(key string) uint64 { return s.blobs[key].Version }); err != nil {
		return nil, err
	}
	versions := make([]uint64, len(puts))
	for i, p := range puts {
		s.seq++
		s.blobs[p.Key] = adapters.Blob{Key: p.Key, Version: s.seq, Data: slices.Clone(p.Data)}
		versions[i] = s.seq
	}
	s.notifyLocked()
	return versions, nil
}

// DeleteBlob implements adapters.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return adapters.ErrClosed
	}
	if cur := s.blobs[key].Version; cur != expect {
		return &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	delete(s.blobs, key)
	s.notifyLocked()
	return nil
}

// ListBlobs implements adapters.BlobStore.
func (s *Store) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, adapters.ErrClosed
	}
	var out []adapters.Blob
	for k, b := range s.blobs {
		if strings.HasPrefix(k, prefix) {
			b.Data = slices.Clone(b.Data)
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b adapters.Blob) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
