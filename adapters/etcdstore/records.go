package etcdstore

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// fence is the condition a tenure adds to every write: the lease blob still carries the
// revision the tenure wrote it at. nil for an unfenced write.
type fence struct {
	key   string // the lease blob's etcd key
	epoch int64
}

// guard adds the fence's compare to cmps and a read of the lease key to the else branch,
// so a refused transaction tells a lost lease from a conflict.
func (f *fence) guard(cmps []clientv3.Cmp, orElse []clientv3.Op) ([]clientv3.Cmp, []clientv3.Op) {
	if f == nil {
		return cmps, orElse
	}
	return append(cmps, clientv3.Compare(clientv3.ModRevision(f.key), "=", f.epoch)), append(orElse, clientv3.OpGet(f.key))
}

// lost reports whether a refused transaction was refused for the fence: its last else
// response is the lease key's read.
func (f *fence) lost(tr *clientv3.TxnResponse) error {
	if f == nil {
		return nil
	}
	kvs := tr.Responses[len(tr.Responses)-1].GetResponseRange().Kvs
	if len(kvs) == 1 && kvs[0].ModRevision == f.epoch {
		return nil
	}
	now := "gone (expired or revoked)"
	if len(kvs) == 1 {
		now = fmt.Sprintf("at revision %d", kvs[0].ModRevision)
	}
	return fmt.Errorf("etcdstore: %w: the lease written at revision %d is %s; etcd refused the write", adapters.ErrLeaseLost, f.epoch, now)
}

func decodeRecord(db adapters.DBRef, kvs []*mvccpb.KeyValue) (*shardmap.Record, int64, error) {
	if len(kvs) == 0 {
		return nil, 0, nil
	}
	r, err := shardmap.Decode(kvs[0].Value)
	if err != nil {
		return nil, 0, fmt.Errorf("etcdstore: record %s: %w: %v", db, adapters.ErrCorrupt, err)
	}
	return r, kvs[0].ModRevision, nil
}

// Read implements adapters.ShardMapStore with a linearizable read.
func (s *Store) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	r, _, err := s.read(ctx, db)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, adapters.ErrNotFound
	}
	return r, nil
}

// read returns the record (nil when missing) and the revision the read was served at.
func (s *Store) read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, int64, error) {
	if err := s.begin(ctx); err != nil {
		return nil, 0, err
	}
	if err := db.Validate(); err != nil {
		return nil, 0, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cl.Get(cctx, s.recordKey(db))
	if err != nil {
		return nil, 0, s.mapErr(ctx, "read "+db.String(), err)
	}
	r, _, err := decodeRecord(db, resp.Kvs)
	return r, resp.Header.Revision, err
}

// CAS implements adapters.ShardMapStore: one read, then one transaction on the key's mod
// revision.
func (s *Store) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	return s.cas(ctx, db, expect, next, nil)
}

func (s *Store) cas(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record, f *fence) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if err := db.Validate(); err != nil {
		return 0, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	key := s.recordKey(db)
	resp, err := s.cl.Get(cctx, key)
	if err != nil {
		return 0, s.mapErr(ctx, "cas read "+db.String(), err)
	}
	cur, rev, err := decodeRecord(db, resp.Kvs)
	if err != nil {
		return 0, err
	}
	enc, version, err := adapters.EncodeCAS(db, expect, cur, next)
	if err != nil {
		return 0, err
	}
	cmps, orElse := f.guard([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}, []clientv3.Op{clientv3.OpGet(key)})
	tr, err := s.cl.Txn(cctx).If(cmps...).Then(clientv3.OpPut(key, string(enc))).Else(orElse...).Commit()
	if err != nil {
		return 0, s.mapErr(ctx, "cas "+db.String(), err)
	}
	if tr.Succeeded {
		return version, nil
	}
	if err := f.lost(tr); err != nil {
		return 0, err
	}
	// Another write landed between the read and the transaction: report what won. Versions
	// only grow, so it is not expect any more.
	now, _, err := decodeRecord(db, tr.Responses[0].GetResponseRange().Kvs)
	if err != nil {
		return 0, err
	}
	return 0, &adapters.ConflictError{DB: db, Expected: expect, Current: now}
}

// Watch implements adapters.ShardMapStore on etcd's watch. If the watch breaks (the member
// lost its leader, the revision was compacted, the connection dropped) it reads again and
// watches from there, so it returns only a record, or the context's error, or ErrClosed or
// ErrCorrupt.
func (s *Store) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	key := s.recordKey(db)
	for {
		r, rev, err := s.read(ctx, db)
		switch {
		case err == nil && r != nil && r.Version > after:
			return r, nil
		case err == nil:
			if r, err = s.watchFrom(ctx, db, key, rev+1, after); r != nil || err != nil {
				return r, err
			}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case s.closed.Load():
			return nil, adapters.ErrClosed
		case !isUnreachable(err):
			return nil, err
		}
		// The cluster did not answer or the watch broke: try again shortly.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// watchFrom waits for a put of a version above after, from revision rev on. It returns
// (nil, nil) when the watch broke and the caller should read again.
func (s *Store) watchFrom(ctx context.Context, db adapters.DBRef, key string, rev int64, after uint64) (*shardmap.Record, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cl.Watch(wctx, key, clientv3.WithRev(rev)) {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		for _, ev := range wr.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			r, _, err := decodeRecord(db, []*mvccpb.KeyValue{ev.Kv})
			if err != nil {
				return nil, err
			}
			if r.Version > after {
				return r, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, adapters.ErrClosed
	}
	return nil, nil
}
