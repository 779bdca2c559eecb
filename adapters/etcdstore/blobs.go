package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"loam.dev/router/adapters"
)

func isUnreachable(err error) bool { return errors.Is(err, adapters.ErrUnreachable) }

// GetBlob implements adapters.BlobStore.
func (s *Store) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if err := s.begin(ctx); err != nil {
		return adapters.Blob{}, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cl.Get(cctx, s.blobKey(key))
	if err != nil {
		return adapters.Blob{}, s.mapErr(ctx, "get blob "+key, err)
	}
	if len(resp.Kvs) == 0 {
		return adapters.Blob{}, adapters.ErrNotFound
	}
	kv := resp.Kvs[0]
	return adapters.Blob{Key: key, Version: uint64(kv.ModRevision), Data: bytes.Clone(kv.Value)}, nil
}

// PutBlob implements adapters.BlobStore in one transaction on the blob's mod revision.
func (s *Store) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	return s.putBlob(ctx, key, expect, data, nil)
}

func (s *Store) putBlob(ctx context.Context, key string, expect uint64, data []byte, f *fence) (uint64, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	put := clientv3.OpPut(s.blobKey(key), string(data))
	tr, err := s.blobTxn(ctx, "put blob", key, expect, &put, f)
	if err != nil {
		return 0, err
	}
	return uint64(tr.Header.Revision), nil
}

// DeleteBlob implements adapters.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	return s.deleteBlob(ctx, key, expect, nil)
}

func (s *Store) deleteBlob(ctx context.Context, key string, expect uint64, f *fence) error {
	if expect == 0 {
		// Nothing to delete when it is missing; a present blob conflicts.
		_, err := s.blobTxn(ctx, "delete blob", key, 0, nil, f)
		return err
	}
	del := clientv3.OpDelete(s.blobKey(key))
	_, err := s.blobTxn(ctx, "delete blob", key, expect, &del, f)
	return err
}

// blobTxn runs op (none when nil) if the blob's mod revision is expect (0: missing) and
// the fence holds.
func (s *Store) blobTxn(ctx context.Context, what, key string, expect uint64, op *clientv3.Op, f *fence) (*clientv3.TxnResponse, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	k := s.blobKey(key)
	cmps, orElse := f.guard([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", int64(expect))}, []clientv3.Op{clientv3.OpGet(k, clientv3.WithKeysOnly())})
	var then []clientv3.Op
	if op != nil {
		then = append(then, *op)
	}
	tr, err := s.cl.Txn(cctx).If(cmps...).Then(then...).Else(orElse...).Commit()
	if err != nil {
		return nil, s.mapErr(ctx, what+" "+key, err)
	}
	if tr.Succeeded {
		return tr, nil
	}
	if err := f.lost(tr); err != nil {
		return nil, err
	}
	var cur uint64
	if kvs := tr.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		cur = uint64(kvs[0].ModRevision)
	}
	return nil, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
}

// ListBlobs implements adapters.BlobStore with one range read, sorted by key.
func (s *Store) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	base := s.blobKey("")
	resp, err := s.cl.Get(cctx, base+prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, s.mapErr(ctx, "list blobs "+prefix, err)
	}
	out := make([]adapters.Blob, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, adapters.Blob{Key: strings.TrimPrefix(string(kv.Key), base), Version: uint64(kv.ModRevision), Data: bytes.Clone(kv.Value)})
	}
	return out, nil
}
