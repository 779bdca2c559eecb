package conformance_test

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/kernel/shardmap"
)

// runCase runs one case with a recording TB and reports whether it failed.
func runCase(c conformance.StoreCase, h conformance.StoreHarness) (bool, []string) {
	out := conformance.Record(context.Background(), c.Name, func(tb conformance.TB) { c.Run(tb, h) })
	return out.Failed, out.Msgs
}

// naive is a small map-based store with switchable bugs. Unmutated it must pass the whole
// suite, so every failure under a mutation is the mutation's doing.
type naive struct {
	mu      sync.Mutex
	recs    map[adapters.DBRef]*shardmap.Record
	blobs   map[string]adapters.Blob
	seq     uint64
	wake    chan struct{}
	mutants map[string]bool
}

func newNaive(m map[string]bool) *naive {
	return &naive{recs: map[adapters.DBRef]*shardmap.Record{}, blobs: map[string]adapters.Blob{}, wake: make(chan struct{}), mutants: m}
}

func (s *naive) notify() { close(s.wake); s.wake = make(chan struct{}) }

func (s *naive) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[db]
	if !ok {
		return nil, adapters.ErrNotFound
	}
	if s.mutants["read-aliases-store"] {
		return r, nil
	}
	return r.Clone(), nil
}

func (s *naive) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ctx.Err(); err != nil && !s.mutants["cas-ignores-context"] {
		return 0, err
	}
	s.mu.Lock()
	cur := s.recs[db].Clone()
	if s.mutants["cas-unlocked"] {
		// Check then act without holding the lock across both: the classic lost update.
		s.mu.Unlock()
		runtime.Gosched()
	} else {
		defer s.mu.Unlock()
	}
	if s.mutants["cas-ignores-expect"] && cur != nil {
		expect = cur.Version
	}
	if s.mutants["cas-ignores-expect"] && cur == nil {
		expect = 0
	}
	if s.mutants["cas-skips-validation"] {
		if cur != nil && cur.Version != expect || cur == nil && expect != 0 {
			return 0, &adapters.ConflictError{DB: db, Expected: expect, Current: cur.Clone()}
		}
	} else if err := adapters.CheckCAS(db, expect, cur, next); err != nil {
		return 0, err
	}
	if s.mutants["cas-unlocked"] {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	stored := next.Clone()
	stored.Version = expect + 1
	if s.mutants["cas-stores-callers-record"] {
		next.Version = expect + 1
		stored = next
	}
	s.recs[db] = stored
	if !s.mutants["watch-never-woken"] {
		s.notify()
	}
	return stored.Version, nil
}

func (s *naive) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	for {
		s.mu.Lock()
		r := s.recs[db]
		w := s.wake
		s.mu.Unlock()
		if r != nil && (r.Version > after || s.mutants["watch-returns-stale"]) {
			return r.Clone(), nil
		}
		if s.mutants["watch-ignores-context"] {
			<-w
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-w:
		}
	}
}

func (s *naive) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[key]
	if !ok {
		return b, adapters.ErrNotFound
	}
	b.Data = slices.Clone(b.Data)
	return b, nil
}

func (s *naive) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.blobs[key].Version; cur != expect {
		return 0, &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	v := s.seq + 1
	if s.mutants["blob-version-per-key"] {
		v = expect + 1
	} else {
		s.seq++
	}
	s.blobs[key] = adapters.Blob{Key: key, Version: v, Data: slices.Clone(data)}
	return v, nil
}

func (s *naive) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.blobs[key].Version; cur != expect {
		return &adapters.BlobConflictError{Key: key, Expected: expect, Current: cur}
	}
	delete(s.blobs, key)
	return nil
}

func (s *naive) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []adapters.Blob
	for k, b := range s.blobs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b adapters.Blob) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func naiveHarness(mutant string) conformance.StoreHarness {
	m := map[string]bool{mutant: true}
	return conformance.StoreHarness{
		Open: func(conformance.TB) conformance.Store { return newNaive(m) },
		Reopen: func(_ conformance.TB, s conformance.Store) conformance.Store {
			if m["reopen-loses-writes"] {
				return newNaive(m)
			}
			return s // a process-lifetime store: "reopening" keeps the same data
		},
	}
}

// TestStoreSuiteCatchesMutants: each broken store must fail the cases named for it, and
// the unbroken one must pass every case.
func TestStoreSuiteCatchesMutants(t *testing.T) {
	mutants := map[string][]string{
		"":                          nil,
		"cas-ignores-expect":        {"CreateTwiceConflicts", "StaleExpectReturnsCurrent", "ExpectOnMissingConflicts", "RacingCASOneWinnerPerRound"},
		"cas-unlocked":              {"RacingCASOneWinnerPerRound"},
		"cas-skips-validation":      {"RefusesInvalidRecords"},
		"cas-stores-callers-record": {"CreateWithExpectZero", "StoredCopyIsIsolated"},
		"cas-ignores-context":       {"CancelledContextIsRefused"},
		"read-aliases-store":        {"StoredCopyIsIsolated"},
		"watch-never-woken":         {"WatchWakesOnNextWrite"},
		"watch-returns-stale":       {"WatchWakesOnNextWrite"},
		"watch-ignores-context":     {"WatchHonoursCancellation"},
		"reopen-loses-writes":       {"ReopenKeepsAcknowledgedWrites"},
		"blob-version-per-key":      {"Blobs"},
	}
	for mutant, mustFail := range mutants {
		t.Run("mutant="+mutant, func(t *testing.T) {
			h := naiveHarness(mutant)
			var failed []string
			for _, c := range conformance.StoreCases() {
				if mutant == "watch-never-woken" && c.Name != "WatchWakesOnNextWrite" {
					continue // other watch cases would wait out their full timeout
				}
				if mutant == "watch-ignores-context" && c.Name != "WatchHonoursCancellation" {
					continue
				}
				if bad, msgs := runCase(c, h); bad {
					failed = append(failed, c.Name)
					if mutant == "" {
						t.Errorf("the unmutated store fails %s: %v", c.Name, msgs)
					}
				}
			}
			for _, name := range mustFail {
				if !slices.Contains(failed, name) {
					t.Errorf("mutant %q was not caught by case %s (failing cases: %v)", mutant, name, failed)
				}
			}
		})
	}
}
