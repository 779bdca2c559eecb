// Package boltstore is the embedded default ShardMapStore and BlobStore: one bbolt file,
// each compare-and-set inside one bbolt read-write transaction, fsynced before it is
// acknowledged. bbolt locks the file, so one process owns a store at a time and every
// write passes through it; Watch is therefore woken in process, never by polling.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

var (
	bucketRecords = []byte("records")
	bucketBlobs   = []byte("blobs")
)

// ErrLocked means another process holds the store file's lock (bbolt allows one process
// at a time) for longer than Options.LockTimeout.
var ErrLocked = errors.New("locked by another process")

// Store is safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string

	mu      sync.Mutex
	changed chan struct{}
	closed  bool
}

var (
	_ adapters.ShardMapStore = (*Store)(nil)
	_ adapters.BlobStore     = (*Store)(nil)
)

// Options tune Open.
type Options struct {
	// LockTimeout bounds the wait for the file lock another process holds (default 2s).
	LockTimeout time.Duration
}

// Open opens or creates the store file at path and checks its consistency, so a damaged
// file is refused at open with a clear error instead of failing later mid-cutover. An
// existing file is checked read-only before it is opened for writing (a read-write
// transaction rewrites a meta page and the freelist, and bbolt reads the damaged pages it
// writes over), so a refused file is left exactly as it was found. An existing empty file
// is refused too: bbolt never leaves one, and starting an empty store over it would hide
// the loss of the records it was meant to hold.
func Open(path string, opts *Options) (*Store, error) {
	timeout := 2 * time.Second
	if opts != nil && opts.LockTimeout > 0 {
		timeout = opts.LockTimeout
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && st.Size() == 0:
		return nil, fmt.Errorf("boltstore: %s: %w: the file is empty (0 bytes), which bbolt never leaves (a failed copy or a full disk?); restore it from a backup, or remove it to start an empty store", path, adapters.ErrCorrupt)
	case err == nil:
		ro, err := openBolt(path, timeout, true)
		if err != nil {
			return nil, err
		}
		err = verify(ro, path)
		_ = ro.Close()
		if err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("boltstore: cannot open %s: %w", path, err)
	}
	db, err := openBolt(path, timeout, false)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, changed: make(chan struct{})}
	if err := s.create(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func openBolt(path string, timeout time.Duration, readOnly bool) (db *bolt.DB, err error) {
	defer func() {
		// bbolt panics on some kinds of damage while reading meta pages.
		if p := recover(); p != nil {
			db, err = nil, fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup, or move it aside to start empty)", path, adapters.ErrCorrupt, p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: readOnly})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, bolterr.ErrTimeout):
		return nil, fmt.Errorf("boltstore: %s is %w (is another loamrouter using this data directory?), still after %v: %w", path, ErrLocked, timeout, err)
	case errors.Is(err, bolterr.ErrInvalid), errors.Is(err, bolterr.ErrChecksum), errors.Is(err, bolterr.ErrVersionMismatch):
		return nil, fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup, or move it aside to start empty)", path, adapters.ErrCorrupt, err)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return nil, fmt.Errorf("boltstore: cannot open %s: %w", path, err)
	}
	// Truncated files and other damage surface as assorted errors from bbolt.
	return nil, fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup, or move it aside to start empty)", path, adapters.ErrCorrupt, err)
}

// create makes the buckets (a new file) once the file is known sound.
func (s *Store) create() (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("boltstore: %s: %w: %v", s.path, adapters.ErrCorrupt, p)
		}
	}()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketRecords, bucketBlobs} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("boltstore: %s: %w: %v", s.path, adapters.ErrCorrupt, err)
	}
	return nil
}

// verify checks every page of an existing file and decodes every record, read-only.
func verify(db *bolt.DB, path string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup)", path, adapters.ErrCorrupt, p)
		}
	}()
	// Damaged lengths and offsets make bbolt read outside its map; in this goroutine that
	// is a panic recovered above, not a crash of the process. Every page a read reaches is
	// read here first, before tx.Check reads them again in a goroutine of its own.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.View(func(tx *bolt.Tx) error {
		if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) }); err != nil {
			return fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup)", path, adapters.ErrCorrupt, err)
		}
		var first error
		for cerr := range tx.Check() { // drain: Check's goroutine sends every problem
			if first == nil {
				first = fmt.Errorf("boltstore: %s: %w: %v (restore it from a backup)", path, adapters.ErrCorrupt, cerr)
			}
		}
		if first != nil {
			return first
		}
		records := tx.Bucket(bucketRecords)
		if records == nil || tx.Bucket(bucketBlobs) == nil {
			return fmt.Errorf("boltstore: %s: %w: the records and blobs buckets are missing (not a loamrouter store?); restore it from a backup, or move it aside to start empty", path, adapters.ErrCorrupt)
		}
		return records.ForEach(func(k, v []byte) error {
			if _, err := shardmap.Decode(v); err != nil {
				return fmt.Errorf("boltstore: %s: record %q: %w: %v", path, k, adapters.ErrCorrupt, err)
			}
			return nil
		})
	})
}

// walk reads every key and value of b and of the buckets nested in it.
func walk(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walk(nb)
			}
		}
		return nil
	})
}

// Path returns the file the store lives in.
func (s *Store) Path() string { return s.path }

// Close releases the file. Watches return adapters.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.changed)
	}
	s.mu.Unlock()
	return s.db.Close()
}

func (s *Store) notify() {
	s.mu.Lock()
	if !s.closed {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
}

func (s *Store) wake() (<-chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed, s.closed
}

func (s *Store) isClosed() bool {
	_, closed := s.wake()
	return closed
}

func decodeRecord(db adapters.DBRef, v []byte) (*shardmap.Record, error) {
	if v == nil {
		return nil, nil
	}
	r, err := shardmap.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("boltstore: record %s: %w: %v", db, adapters.ErrCorrupt, err)
	}
	return r, nil
}

// Read implements adapters.ShardMapStore.
func (s *Store) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, adapters.ErrClosed
	}
	var r *shardmap.Record
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = decodeRecord(db, tx.Bucket(bucketRecords).Get([]byte(db.Key())))
		return err
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	if r == nil {
		return nil, adapters.ErrNotFound
	}
	return r, nil
}

func (s *Store) mapErr(err error) error {
	if errors.Is(err, bolterr.ErrDatabaseNotOpen) {
		return adapters.ErrClosed
	}
	return err
}

// CAS implements adapters.ShardMapStore. The write is fsynced before CAS returns.
func (s *Store) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.isClosed() {
		return 0, adapters.ErrClosed
	}
	var version uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRecords)
		cur, err := decodeRecord(db, b.Get([]byte(db.Key())))
		if err != nil {
			return err
		}
		enc, v, err := adapters.EncodeCAS(db, expect, cur, next)
		if err != nil {
			return err
		}
		version = v
		return b.Put([]byte(db.Key()), enc)
	})
	if err != nil {
		return 0, s.mapErr(err)
	}
	s.notify()
	return version, nil
}

// Watch implements adapters.ShardMapStore; every committed write in this process wakes it.
func (s *Store) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	for {
		wake, closed := s.wake()
		if closed {
			return nil, adapters.ErrClosed
		}
		r, err := s.Read(ctx, db)
		switch {
		case err == nil && r.Version > after:
			return r, nil
		case err != nil && !errors.Is(err, adapters.ErrNotFound):
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// Blobs are stored as an 8-byte big-endian version followed by the data. Versions come
// from the blob bucket's sequence, which only grows, so none is ever reused.

func blobVersion(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (s *Store) blobAt(key string, v []byte) (adapters.Blob, error) {
	if len(v) < 8 {
		return adapters.Blob{}, fmt.Errorf("boltstore: blob %q: %w: %d bytes, shorter than its version", key, adapters.ErrCorrupt, len(v))
	}
	return adapters.Blob{Key: key, Version: blobVersion(v), Data: bytes.Clone(v[8:])}, nil
}

// GetBlob implements adapters.BlobStore.
func (s *Store) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return adapters.Blob{}, err
	}
	if s.isClosed() {
		return adapters.Blob{}, adapters.ErrClosed
	}
	var out adapters.Blob
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBlobs).Get([]byte(key))
		if v == nil {
			return adapters.ErrNotFound
		}
		var err error
		out, err = s.blobAt(key, v)
		return err
	})
	return out, s.mapErr(err)
}

// PutBlob implements adapters.BlobStore.
func (s *Store) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	if s.isClosed() {
		return 0, adapters.ErrClosed
	}
	var version uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlobs)
		if cur := blobVersion(b.Get([]byte(key))); cur != expect {
			return &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		version = seq
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), seq)
		return b.Put([]byte(key), append(v, data...))
	})
	if err != nil {
		return 0, s.mapErr(err)
	}
	s.notify()
	return version, nil
}

// PutBlobs implements adapters.BlobBatcher: every put in one transaction (one fsync), or
// none.
func (s *Store) PutBlobs(ctx context.Context, puts []adapters.BlobPut) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, adapters.ErrClosed
	}
	versions := make([]uint64, len(puts))
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlobs)
		if err := adapters.CheckBlobPuts(puts, func(key string) uint64 { return blobVersion(b.Get([]byte(key))) }); err != nil {
			return err
		}
		for i, p := range puts {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			versions[i] = seq
			v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(p.Data)), seq)
			if err := b.Put([]byte(p.Key), append(v, p.Data...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	s.notify()
	return versions, nil
}

// DeleteBlob implements adapters.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return adapters.ErrClosed
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlobs)
		if cur := blobVersion(b.Get([]byte(key))); cur != expect {
			return &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
		}
		return b.Delete([]byte(key))
	})
	if err != nil {
		return s.mapErr(err)
	}
	s.notify()
	return nil
}

// ListBlobs implements adapters.BlobStore.
func (s *Store) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.isClosed() {
		return nil, adapters.ErrClosed
	}
	var out []adapters.Blob
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			b, err := s.blobAt(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	return out, s.mapErr(err)
}
