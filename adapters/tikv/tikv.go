// Package tikv is a ShardMapStore and BlobStore on TiKV's transactional API, for control
// planes whose metastore is TiKV. Records live under xs/<namespace>/<database>, blobs under
// xb/<key>.
//
// Each compare-and-set is one optimistic transaction: read the key, check the version,
// write, commit. Two transactions that both pass the check collide at commit; TiKV reports
// a write conflict to the later one, which this package turns into *adapters.ConflictError
// carrying the record that won, exactly as a stale version is reported.
//
// TiKV has no watch (client-go exposes no change feed), so Watch polls the record's key
// with a fresh snapshot, backing off from Options.PollMin to Options.PollMax (defaults 10ms
// and 250ms). A committed change is therefore seen by a waiting Watch within PollMax plus
// one snapshot read; a Watch that finds the change on its first read returns at once.
//
// client-go logs through github.com/pingcap/log, whose default logger writes to standard
// output. Open replaces it, once per process, with one that writes to standard error at
// Options.LogLevel (default "warn"), so a CLI's standard output stays clean.
package tikv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/pingcap/log"
	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv"
	"go.uber.org/zap/zapcore"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Options tune a Store.
type Options struct {
	PollMin, PollMax time.Duration // Watch's polling backoff bounds
	// LogLevel of client-go's logger ("debug", "info", "warn", "error"); "" means "warn".
	LogLevel string
	// KeepLogger leaves client-go's global logger as the caller configured it.
	KeepLogger bool
}

func (o *Options) withDefaults() Options {
	out := Options{PollMin: 10 * time.Millisecond, PollMax: 250 * time.Millisecond, LogLevel: "warn"}
	if o == nil {
		return out
	}
	if o.PollMin > 0 {
		out.PollMin = o.PollMin
	}
	if o.PollMax > 0 {
		out.PollMax = o.PollMax
	}
	if out.PollMax < out.PollMin {
		out.PollMax = out.PollMin
	}
	if o.LogLevel != "" {
		out.LogLevel = o.LogLevel
	}
	out.KeepLogger = o.KeepLogger
	return out
}

// Store is safe for concurrent use.
type Store struct {
	kv    *tikv.KVStore
	opts  Options
	close func() error
}

var (
	_ adapters.ShardMapStore = (*Store)(nil)
	_ adapters.BlobStore     = (*Store)(nil)
)

var logOnce sync.Once

func quietLogger(level string) error {
	var err error
	logOnce.Do(func() {
		lg, props, e := log.InitLoggerWithWriteSyncer(&log.Config{Level: level}, zapcore.AddSync(os.Stderr), zapcore.AddSync(os.Stderr))
		if e != nil {
			err = fmt.Errorf("tikv: log level %q: %w", level, e)
			return
		}
		log.ReplaceGlobals(lg, props)
	})
	return err
}

// Open connects to the TiKV cluster behind the given PD endpoints.
func Open(pdAddrs []string, opts *Options) (*Store, error) {
	o := opts.withDefaults()
	if !o.KeepLogger {
		if err := quietLogger(o.LogLevel); err != nil {
			return nil, err
		}
	}
	if len(pdAddrs) == 0 {
		return nil, errors.New("tikv: no PD endpoints given (e.g. 127.0.0.1:2379)")
	}
	c, err := txnkv.NewClient(pdAddrs)
	if err != nil {
		return nil, fmt.Errorf("tikv: connect to PD %v: %w", pdAddrs, err)
	}
	return &Store{kv: c.KVStore, opts: o, close: c.Close}, nil
}

// New wraps an open KVStore (for example client-go's in-process mock; see tikvtest).
// Close closes it.
func New(kv *tikv.KVStore, opts *Options) (*Store, error) {
	o := opts.withDefaults()
	if !o.KeepLogger {
		if err := quietLogger(o.LogLevel); err != nil {
			return nil, err
		}
	}
	return &Store{kv: kv, opts: o, close: kv.Close}, nil
}

// Close releases the client.
func (s *Store) Close() error { return s.close() }

func (s *Store) mapErr(op string, err error) error {
	select {
	case <-s.kv.Closed():
		return adapters.ErrClosed
	default:
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("tikv: %s: %w", op, err)
}

func (s *Store) closed() bool {
	select {
	case <-s.kv.Closed():
		return true
	default:
		return false
	}
}

// snapshotGet reads key at a fresh timestamp; a missing key is (nil, nil).
func (s *Store) snapshotGet(ctx context.Context, key []byte) ([]byte, error) {
	ts, err := s.kv.CurrentTimestamp("global")
	if err != nil {
		return nil, err
	}
	v, err := s.kv.GetSnapshot(ts).Get(ctx, key)
	if tikverr.IsErrNotFound(err) {
		return nil, nil
	}
	return v, err
}

func decodeRecord(db adapters.DBRef, v []byte) (*shardmap.Record, error) {
	if v == nil {
		return nil, nil
	}
	r, err := shardmap.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("tikv: record %s: %w: %v", db, adapters.ErrCorrupt, err)
	}
	return r, nil
}

// Read implements adapters.ShardMapStore.
func (s *Store) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed() {
		return nil, adapters.ErrClosed
	}
	v, err := s.snapshotGet(ctx, []byte(db.Key()))
	if err != nil {
		return nil, s.mapErr("read "+db.String(), err)
	}
	r, err := decodeRecord(db, v)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, adapters.ErrNotFound
	}
	return r, nil
}

// CAS implements adapters.ShardMapStore in one optimistic transaction.
func (s *Store) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.closed() {
		return 0, adapters.ErrClosed
	}
	key := []byte(db.Key())
	txn, err := s.kv.Begin()
	if err != nil {
		return 0, s.mapErr("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = txn.Rollback()
		}
	}()
	v, err := txn.Get(ctx, key)
	if err != nil && !tikverr.IsErrNotFound(err) {
		return 0, s.mapErr("cas read "+db.String(), err)
	}
	cur, err := decodeRecord(db, v)
	if err != nil {
		return 0, err
	}
	enc, version, err := adapters.EncodeCAS(db, expect, cur, next)
	if err != nil {
		return 0, err
	}
	if err := txn.Set(key, enc); err != nil {
		return 0, s.mapErr("cas write "+db.String(), err)
	}
	err = txn.Commit(ctx)
	committed = true
	if tikverr.IsErrWriteConflict(err) {
		// Another transaction wrote this key after we read it: report what won.
		now, rerr := s.readPast(ctx, db, expect)
		if rerr != nil {
			return 0, rerr
		}
		return 0, &adapters.ConflictError{DB: db, Expected: expect, Current: now}
	}
	if err != nil {
		return 0, s.mapErr("cas commit "+db.String(), err)
	}
	return version, nil
}

// readPast reads the record after a write conflict. The conflicting transaction may still
// be committing (its lock, not its write, can be what we met), so read until the version
// has moved past expect, for up to a second, and report what is there then.
func (s *Store) readPast(ctx context.Context, db adapters.DBRef, expect uint64) (*shardmap.Record, error) {
	deadline := time.Now().Add(time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		r, err := s.Read(ctx, db)
		if err != nil && !errors.Is(err, adapters.ErrNotFound) {
			return nil, err
		}
		if (r != nil && r.Version != expect) || time.Now().After(deadline) {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// Watch implements adapters.ShardMapStore by polling with bounded backoff (see the
// package doc for the latency this implies).
func (s *Store) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	wait := s.opts.PollMin
	for {
		r, err := s.Read(ctx, db)
		switch {
		case err == nil && r.Version > after:
			return r, nil
		case err != nil && !errors.Is(err, adapters.ErrNotFound):
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-s.kv.Closed():
			t.Stop()
			return nil, adapters.ErrClosed
		case <-t.C:
		}
		wait = min(wait*2, s.opts.PollMax)
	}
}

// Blobs are stored under xb/<key> as an 8-byte big-endian version followed by the data.
// A blob's version is the start timestamp of the transaction that wrote it: TSO timestamps
// are unique and increasing across the cluster, so no version is ever reused, even for a
// key deleted and created again.

func blobKey(key string) []byte { return append([]byte("xb/"), key...) }

func blobVersion(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func blobFrom(key string, v []byte) (adapters.Blob, error) {
	if len(v) < 8 {
		return adapters.Blob{}, fmt.Errorf("tikv: blob %q: %w: %d bytes, shorter than its version", key, adapters.ErrCorrupt, len(v))
	}
	return adapters.Blob{Key: key, Version: blobVersion(v), Data: bytes.Clone(v[8:])}, nil
}

// GetBlob implements adapters.BlobStore.
func (s *Store) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return adapters.Blob{}, err
	}
	if s.closed() {
		return adapters.Blob{}, adapters.ErrClosed
	}
	v, err := s.snapshotGet(ctx, blobKey(key))
	if err != nil {
		return adapters.Blob{}, s.mapErr("get blob "+key, err)
	}
	if v == nil {
		return adapters.Blob{}, adapters.ErrNotFound
	}
	return blobFrom(key, v)
}

// blobTxn runs a read-check-write transaction on one blob key.
func (s *Store) blobTxn(ctx context.Context, key string, expect uint64, write func(txn blobWriter, version uint64) error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.closed() {
		return 0, adapters.ErrClosed
	}
	k := blobKey(key)
	txn, err := s.kv.Begin()
	if err != nil {
		return 0, s.mapErr("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = txn.Rollback()
		}
	}()
	v, err := txn.Get(ctx, k)
	if err != nil && !tikverr.IsErrNotFound(err) {
		return 0, s.mapErr("blob read "+key, err)
	}
	if cur := blobVersion(v); cur != expect {
		return 0, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	version := txn.StartTS()
	if err := write(txn, version); err != nil {
		return 0, s.mapErr("blob write "+key, err)
	}
	err = txn.Commit(ctx)
	committed = true
	if tikverr.IsErrWriteConflict(err) {
		// As in CAS: the winner may still be committing; wait for its version.
		deadline := time.Now().Add(time.Second)
		for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
			cur, gerr := s.GetBlob(ctx, key)
			if gerr != nil && !errors.Is(gerr, adapters.ErrNotFound) {
				return 0, gerr
			}
			if cur.Version != expect || time.Now().After(deadline) {
				return 0, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur.Version}
			}
			time.Sleep(wait)
		}
	}
	if err != nil {
		return 0, s.mapErr("blob commit "+key, err)
	}
	return version, nil
}

type blobWriter interface {
	Set(k, v []byte) error
	Delete(k []byte) error
}

// PutBlob implements adapters.BlobStore.
func (s *Store) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	return s.blobTxn(ctx, key, expect, func(txn blobWriter, version uint64) error {
		v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), version)
		return txn.Set(blobKey(key), append(v, data...))
	})
}

// DeleteBlob implements adapters.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	if expect == 0 {
		// Nothing to delete if it is absent; a present blob conflicts.
		b, err := s.GetBlob(ctx, key)
		if errors.Is(err, adapters.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return &adapters.BlobConflictError{Key: key, Expected: 0, Current: b.Version}
	}
	_, err := s.blobTxn(ctx, key, expect, func(txn blobWriter, _ uint64) error {
		return txn.Delete(blobKey(key))
	})
	return err
}

// ListBlobs implements adapters.BlobStore with one snapshot scan of the prefix.
func (s *Store) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed() {
		return nil, adapters.ErrClosed
	}
	ts, err := s.kv.CurrentTimestamp("global")
	if err != nil {
		return nil, s.mapErr("list blobs", err)
	}
	start := blobKey(prefix)
	it, err := s.kv.GetSnapshot(ts).Iter(start, prefixEnd(start))
	if err != nil {
		return nil, s.mapErr("list blobs", err)
	}
	defer it.Close()
	var out []adapters.Blob
	for it.Valid() {
		b, err := blobFrom(string(it.Key()[3:]), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		if err := it.Next(); err != nil {
			return nil, s.mapErr("list blobs", err)
		}
	}
	return out, nil
}

// prefixEnd is the first key after every key with the prefix.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
