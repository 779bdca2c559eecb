package model

import (
	"maps"
	"slices"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/kernel/shardmap"
)

// Store is the shard map store (records and blobs) as one in-memory state, for the
// simulator. Every method runs to completion at once: the network delivers the request
// and carries the answer back, so the model itself has no notion of waiting except Watch,
// which answers when a newer version is written. The checks are the real stores' checks
// (adapters.CheckCAS), so the model refuses exactly what they refuse.
type Store struct {
	s       *detsim.Sim // nil outside a simulation: no fault fires
	records map[adapters.DBRef]*shardmap.Record
	blobs   map[string]adapters.Blob
	seq     uint64
	watches []*watch
	// Writes is every record write that committed, in order, for the checkers.
	Writes []RecordWrite
	// Committed, when set, sees every record that commits (a clone), for checkers that
	// need more of it than Writes keeps.
	Committed func(adapters.DBRef, *shardmap.Record)
}

// RecordWrite is one committed record write. Seq is the simulator's event count: it
// orders writes within one millisecond.
type RecordWrite struct {
	T          int64
	Seq        int
	DB         adapters.DBRef
	Version    uint64
	Generation uint64
	Phase      shardmap.Phase
	Step       shardmap.CutoverStep
	// Injected marks the concurrent rewrite the store.cas.conflict fault makes.
	Injected bool
}

type watch struct {
	db    adapters.DBRef
	after uint64
	fn    func(*shardmap.Record)
}

// NewStore returns an empty store; s may be nil (no faults, used by the contract suite).
func NewStore(s *detsim.Sim) *Store {
	return &Store{s: s, records: map[adapters.DBRef]*shardmap.Record{}, blobs: map[string]adapters.Blob{}}
}

// Read returns a copy of the stored record, or adapters.ErrNotFound.
func (st *Store) Read(db adapters.DBRef) (*shardmap.Record, error) {
	r, ok := st.records[db]
	if !ok {
		return nil, adapters.ErrNotFound
	}
	return r.Clone(), nil
}

// CAS implements ShardMapStore.CAS. Fault store.cas.conflict: another writer stores the
// same content as a new version just before, so this CAS conflicts (when there is a record).
func (st *Store) CAS(db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if cur := st.records[db]; cur != nil && st.s != nil && st.s.Fault("store.cas.conflict") {
		bumped := cur.Clone()
		bumped.Version++
		st.commit(db, bumped, true)
	}
	cur := st.records[db]
	if err := adapters.CheckCAS(db, expect, cur, next); err != nil {
		return 0, err
	}
	stored := next.Clone()
	stored.Version = expect + 1
	st.commit(db, stored, false)
	return stored.Version, nil
}

func (st *Store) commit(db adapters.DBRef, r *shardmap.Record, injected bool) {
	st.records[db] = r
	var now int64
	var step int
	if st.s != nil {
		now, step = st.s.Now(), st.s.Steps()
	}
	st.Writes = append(st.Writes, RecordWrite{T: now, Seq: step, DB: db, Version: r.Version, Generation: r.Generation,
		Phase: r.State.Phase, Step: r.State.Step, Injected: injected})
	if st.Committed != nil {
		st.Committed(db, r.Clone())
	}
	// Fire the watches this write satisfies, in registration order; the others wait.
	var fire []*watch
	st.watches = slices.DeleteFunc(st.watches, func(w *watch) bool {
		if w.db == db && r.Version > w.after {
			fire = append(fire, w)
			return true
		}
		return false
	})
	for _, w := range fire {
		w.fn(r.Clone())
	}
}

// Watch calls fn with the first stored record whose version is above after: at once if
// there is one, otherwise on the write that makes one. The returned func cancels it.
func (st *Store) Watch(db adapters.DBRef, after uint64, fn func(*shardmap.Record)) (cancel func()) {
	if r, ok := st.records[db]; ok && r.Version > after {
		fn(r.Clone())
		return func() {}
	}
	w := &watch{db: db, after: after, fn: fn}
	st.watches = append(st.watches, w)
	return func() { st.watches = slices.DeleteFunc(st.watches, func(x *watch) bool { return x == w }) }
}

// Current returns the stored record without copying, for checkers (never modify it).
func (st *Store) Current(db adapters.DBRef) *shardmap.Record { return st.records[db] }

// GetBlob implements BlobStore.GetBlob.
func (st *Store) GetBlob(key string) (adapters.Blob, error) {
	b, ok := st.blobs[key]
	if !ok {
		return adapters.Blob{}, adapters.ErrNotFound
	}
	b.Data = slices.Clone(b.Data)
	return b, nil
}

// PutBlob implements BlobStore.PutBlob.
func (st *Store) PutBlob(key string, expect uint64, data []byte) (uint64, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	if cur := st.blobs[key].Version; cur != expect {
		return 0, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	st.seq++
	st.blobs[key] = adapters.Blob{Key: key, Version: st.seq, Data: slices.Clone(data)}
	return st.seq, nil
}

// DeleteBlob implements BlobStore.DeleteBlob.
func (st *Store) DeleteBlob(key string, expect uint64) error {
	if cur := st.blobs[key].Version; cur != expect {
		return &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	delete(st.blobs, key)
	return nil
}

// ListBlobs implements BlobStore.ListBlobs.
func (st *Store) ListBlobs(prefix string) []adapters.Blob {
	var out []adapters.Blob
	for _, k := range slices.Sorted(maps.Keys(st.blobs)) {
		if strings.HasPrefix(k, prefix) {
			b := st.blobs[k]
			b.Data = slices.Clone(b.Data)
			out = append(out, b)
		}
	}
	return out
}
