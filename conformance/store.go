package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Store is what the store suite exercises: records and blobs.
type Store interface {
	adapters.ShardMapStore
	adapters.BlobStore
}

// StoreHarness opens stores for the suite.
type StoreHarness struct {
	// Open returns a new, empty store. The harness closes it in t.Cleanup.
	Open func(t TB) Store
	// Reopen closes s and opens the same data again; nil for stores that keep nothing
	// across a close (memory).
	Reopen func(t TB, s Store) Store
}

// StoreCase is one contract case.
type StoreCase struct {
	Name string
	Run  func(t TB, h StoreHarness)
}

// RunStoreSuite runs every store case as a subtest.
func RunStoreSuite(t *testing.T, h StoreHarness) {
	for _, c := range StoreCases() {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, h) })
	}
}

var testDB = adapters.DBRef{Namespace: "ns", Database: "app"}

// SampleRecord returns a valid record of a 2-shard PgDog database named db, at generation
// gen. Suites and models use it as their ordinary input.
func SampleRecord(db string, gen uint64) *shardmap.Record {
	r := shardmap.NewPgHash(db, shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "127.0.0.1", Port: 5432, Database: db},
		shardmap.Backend{Host: "127.0.0.1", Port: 5433, Database: db})
	r.Generation = gen
	return r
}

// watchWait bounds every wait in the suite, so a store that never answers fails the case
// instead of hanging the test binary.
const watchWait = 2 * time.Second

// StoreCases returns the store contract.
func StoreCases() []StoreCase {
	return []StoreCase{
		{"ReadMissing", func(t TB, h StoreHarness) {
			s := h.Open(t)
			_, err := s.Read(t.Context(), testDB)
			require.ErrorIs(t, err, adapters.ErrNotFound)
		}},
		{"CreateWithExpectZero", func(t TB, h StoreHarness) {
			s := h.Open(t)
			rec := SampleRecord("app", 1)
			v, err := s.CAS(t.Context(), testDB, 0, rec)
			require.NoError(t, err)
			require.Equal(t, uint64(1), v, "the first version is 1")
			require.Zero(t, rec.Version, "CAS must not modify the caller's record")
			got, err := s.Read(t.Context(), testDB)
			require.NoError(t, err)
			want := rec.Clone()
			want.Version = 1
			require.Equal(t, want, got)
		}},
		{"CreateTwiceConflicts", func(t TB, h StoreHarness) {
			s := h.Open(t)
			_, err := s.CAS(t.Context(), testDB, 0, SampleRecord("app", 1))
			require.NoError(t, err)
			_, err = s.CAS(t.Context(), testDB, 0, SampleRecord("app", 2))
			var ce *adapters.ConflictError
			require.ErrorAs(t, err, &ce)
			require.ErrorIs(t, err, adapters.ErrConflict)
			require.NotNil(t, ce.Current)
			require.Equal(t, uint64(1), ce.Current.Version)
			require.Equal(t, uint64(1), ce.Current.Generation, "the losing write must not be stored")
		}},
		{"StaleExpectReturnsCurrent", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			for i := range uint64(3) {
				v, err := s.CAS(ctx, testDB, i, SampleRecord("app", i+1))
				require.NoError(t, err)
				require.Equal(t, i+1, v)
			}
			_, err := s.CAS(ctx, testDB, 1, SampleRecord("app", 9))
			var ce *adapters.ConflictError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, uint64(1), ce.Expected)
			require.Equal(t, uint64(3), ce.Current.Version)
			require.Equal(t, uint64(3), ce.Current.Generation)
			_, err = s.CAS(ctx, testDB, 7, SampleRecord("app", 9))
			require.ErrorAs(t, err, &ce, "an expect above the current version conflicts too")
			got, err := s.Read(ctx, testDB)
			require.NoError(t, err)
			require.Equal(t, uint64(3), got.Version)
		}},
		{"ExpectOnMissingConflicts", func(t TB, h StoreHarness) {
			s := h.Open(t)
			_, err := s.CAS(t.Context(), testDB, 4, SampleRecord("app", 1))
			var ce *adapters.ConflictError
			require.ErrorAs(t, err, &ce)
			require.Nil(t, ce.Current)
			_, err = s.Read(t.Context(), testDB)
			require.ErrorIs(t, err, adapters.ErrNotFound)
		}},
		{"VersionsNeverReused", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			seen := map[uint64]bool{}
			var cur uint64
			for i := range 20 {
				gen := uint64(i/3 + 1) // generations repeat: versions must not
				v, err := s.CAS(ctx, testDB, cur, SampleRecord("app", gen))
				require.NoError(t, err)
				require.False(t, seen[v], "version %d returned twice", v)
				require.Equal(t, cur+1, v)
				seen[v] = true
				cur = v
			}
		}},
		{"StoredCopyIsIsolated", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			rec := SampleRecord("app", 1)
			_, err := s.CAS(ctx, testDB, 0, rec)
			require.NoError(t, err)
			rec.Shards[0].Name = "mutated-after-cas"
			got, err := s.Read(ctx, testDB)
			require.NoError(t, err)
			require.Equal(t, "s0", got.Shards[0].Name)
			got.Shards[1].Name = "mutated-after-read"
			again, err := s.Read(ctx, testDB)
			require.NoError(t, err)
			require.Equal(t, "s1", again.Shards[1].Name)
		}},
		{"RefusesInvalidRecords", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			bad := SampleRecord("app", 1)
			bad.Shards[1].Name = "s0"
			_, err := s.CAS(ctx, testDB, 0, bad)
			require.ErrorIs(t, err, shardmap.ErrInvalid)
			require.ErrorContains(t, err, "shards[1].name")
			_, err = s.Read(ctx, testDB)
			require.ErrorIs(t, err, adapters.ErrNotFound, "a refused write stores nothing")
			_, err = s.CAS(ctx, testDB, 0, SampleRecord("app", 5))
			require.NoError(t, err)
			_, err = s.CAS(ctx, testDB, 1, SampleRecord("app", 4))
			require.ErrorContains(t, err, "goes backwards from 5 to 4")
			_, err = s.CAS(ctx, adapters.DBRef{Namespace: "ns", Database: "a/b"}, 0, SampleRecord("app", 1))
			require.ErrorContains(t, err, "may not contain '/'")
		}},
		{"DatabasesAreIndependent", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			other := adapters.DBRef{Namespace: "ns", Database: "other"}
			otherNS := adapters.DBRef{Namespace: "ns2", Database: "app"}
			_, err := s.CAS(ctx, testDB, 0, SampleRecord("app", 1))
			require.NoError(t, err)
			_, err = s.CAS(ctx, other, 0, SampleRecord("other", 7))
			require.NoError(t, err)
			_, err = s.Read(ctx, otherNS)
			require.ErrorIs(t, err, adapters.ErrNotFound)
			a, _ := s.Read(ctx, testDB)
			b, _ := s.Read(ctx, other)
			require.Equal(t, uint64(1), a.Generation)
			require.Equal(t, uint64(7), b.Generation)
		}},
		{"RacingCASOneWinnerPerRound", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			const racers, rounds = 8, 25
			var cur uint64
			for round := range rounds {
				var wg sync.WaitGroup
				wins := make(chan uint64, racers)
				errs := make(chan error, racers)
				start := make(chan struct{})
				for r := range racers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						rec := SampleRecord("app", uint64(round+1))
						rec.Shards[0].Backend.Host = fmt.Sprintf("racer-%d", r)
						if round == 0 {
							rec.Generation = 1
						}
						v, err := s.CAS(ctx, testDB, cur, rec)
						if err != nil {
							errs <- err
							return
						}
						wins <- v
					}()
				}
				close(start)
				wg.Wait()
				close(wins)
				close(errs)
				var won []uint64
				for v := range wins {
					won = append(won, v)
				}
				require.Len(t, won, 1, "round %d: exactly one racer must win", round)
				require.Equal(t, cur+1, won[0])
				for err := range errs {
					var ce *adapters.ConflictError
					require.ErrorAs(t, err, &ce, "round %d: a loser must get a conflict", round)
					require.Equal(t, cur+1, ce.Current.Version, "a loser sees the winner's version")
				}
				cur = won[0]
			}
		}},
		{"WatchReturnsNewerAtOnce", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx, cancel := context.WithTimeout(t.Context(), watchWait)
			defer cancel()
			_, err := s.CAS(ctx, testDB, 0, SampleRecord("app", 1))
			require.NoError(t, err)
			got, err := s.Watch(ctx, testDB, 0)
			require.NoError(t, err)
			require.Equal(t, uint64(1), got.Version)
		}},
		{"WatchWakesOnNextWrite", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx, cancel := context.WithTimeout(t.Context(), watchWait)
			defer cancel()
			type res struct {
				r   *shardmap.Record
				err error
			}
			ch := make(chan res, 2)
			go func() { r, err := s.Watch(ctx, testDB, 0); ch <- res{r, err} }() // waits for creation
			time.Sleep(20 * time.Millisecond)
			_, err := s.CAS(ctx, testDB, 0, SampleRecord("app", 1))
			require.NoError(t, err)
			got := <-ch
			require.NoError(t, got.err)
			require.Equal(t, uint64(1), got.r.Version)

			go func() { r, err := s.Watch(ctx, testDB, 1); ch <- res{r, err} }()
			time.Sleep(20 * time.Millisecond)
			select {
			case r := <-ch:
				t.Fatalf("Watch(after=1) returned before any newer write: %+v", r)
			default:
			}
			_, err = s.CAS(ctx, testDB, 1, SampleRecord("app", 2))
			require.NoError(t, err)
			got = <-ch
			require.NoError(t, got.err)
			require.Equal(t, uint64(2), got.r.Version)
			require.Equal(t, uint64(2), got.r.Generation)
		}},
		{"WatchHonoursCancellation", func(t TB, h StoreHarness) {
			s := h.Open(t)
			_, err := s.CAS(t.Context(), testDB, 0, SampleRecord("app", 1))
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { _, err := s.Watch(ctx, testDB, 1); done <- err }()
			time.Sleep(20 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				require.ErrorIs(t, err, context.Canceled)
			case <-time.After(watchWait):
				t.Fatalf("Watch did not return within %v of its context being cancelled", watchWait)
			}
			dctx, dcancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
			defer dcancel()
			_, err = s.Watch(dctx, testDB, 1)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}},
		{"ReopenKeepsAcknowledgedWrites", func(t TB, h StoreHarness) {
			if h.Reopen == nil {
				return // nothing persists across a close
			}
			s := h.Open(t)
			ctx := t.Context()
			dbs := []adapters.DBRef{testDB, {Namespace: "ns", Database: "b"}, {Namespace: "other", Database: "app"}}
			want := map[adapters.DBRef]uint64{}
			for i := range 30 {
				db := dbs[i%len(dbs)]
				v, err := s.CAS(ctx, db, want[db], SampleRecord(db.Database, uint64(i+1)))
				require.NoError(t, err)
				want[db] = v
			}
			bv, err := s.PutBlob(ctx, "snap/cutover/app", 0, []byte("state"))
			require.NoError(t, err)
			s = h.Reopen(t, s)
			for db, v := range want {
				got, err := s.Read(ctx, db)
				require.NoError(t, err, "%s lost after reopen", db)
				require.Equal(t, v, got.Version, "%s", db)
			}
			b, err := s.GetBlob(ctx, "snap/cutover/app")
			require.NoError(t, err)
			require.Equal(t, bv, b.Version)
			require.Equal(t, "state", string(b.Data))
			// The blob version counter survives too: a new version is above every old one.
			v2, err := s.PutBlob(ctx, "snap/other", 0, nil)
			require.NoError(t, err)
			require.Greater(t, v2, bv)
		}},
		{"Blobs", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			_, err := s.GetBlob(ctx, "lease/controller")
			require.ErrorIs(t, err, adapters.ErrNotFound)
			v1, err := s.PutBlob(ctx, "lease/controller", 0, []byte("a"))
			require.NoError(t, err)
			require.NotZero(t, v1)
			_, err = s.PutBlob(ctx, "lease/controller", 0, []byte("b"))
			var bc *adapters.BlobConflictError
			require.ErrorAs(t, err, &bc)
			require.ErrorIs(t, err, adapters.ErrConflict)
			require.Equal(t, v1, bc.Current)
			v2, err := s.PutBlob(ctx, "lease/controller", v1, []byte("c"))
			require.NoError(t, err)
			require.Greater(t, v2, v1)
			b, err := s.GetBlob(ctx, "lease/controller")
			require.NoError(t, err)
			require.Equal(t, adapters.Blob{Key: "lease/controller", Version: v2, Data: []byte("c")}, b)
			b.Data[0] = 'x'
			b, _ = s.GetBlob(ctx, "lease/controller")
			require.Equal(t, "c", string(b.Data), "a returned blob must not alias the store")

			require.ErrorAs(t, s.DeleteBlob(ctx, "lease/controller", v1), &bc)
			require.NoError(t, s.DeleteBlob(ctx, "lease/controller", v2))
			require.NoError(t, s.DeleteBlob(ctx, "lease/controller", 0), "deleting a missing blob with expect 0 is fine")
			v3, err := s.PutBlob(ctx, "lease/controller", 0, []byte("d"))
			require.NoError(t, err)
			require.Greater(t, v3, v2, "a re-created blob must not reuse a version (no ABA)")

			for _, k := range []string{"snap/b", "snap/a", "snapx", "other"} {
				_, err := s.PutBlob(ctx, k, 0, []byte(k))
				require.NoError(t, err)
			}
			list, err := s.ListBlobs(ctx, "snap/")
			require.NoError(t, err)
			require.Len(t, list, 2)
			require.Equal(t, "snap/a", list[0].Key)
			require.Equal(t, "snap/b", list[1].Key)
			require.Equal(t, "snap/b", string(list[1].Data))

			_, err = s.PutBlob(ctx, "xs/ns/app", 0, nil)
			require.ErrorContains(t, err, "record namespace")
			_, err = s.PutBlob(ctx, "", 0, nil)
			require.Error(t, err)
		}},
		{"PutBlobsAllOrNothing", func(t TB, h StoreHarness) {
			s := h.Open(t)
			bs, ok := s.(adapters.BlobBatcher)
			if !ok {
				return // the store writes one blob at a time; the driver writes concurrently
			}
			ctx := t.Context()
			v0, err := s.PutBlob(ctx, "machine/cutover/app", 0, []byte("s0"))
			require.NoError(t, err)
			vs, err := bs.PutBlobs(ctx, []adapters.BlobPut{
				{Key: "machine/cutover/app", Expect: v0, Data: []byte("s1")},
				{Key: "audit/1/a", Data: []byte("e1")}})
			require.NoError(t, err)
			require.Len(t, vs, 2)
			require.Greater(t, vs[0], v0)
			require.NotEqual(t, vs[0], vs[1], "each blob its own version")
			for i, k := range []string{"machine/cutover/app", "audit/1/a"} {
				b, err := s.GetBlob(ctx, k)
				require.NoError(t, err)
				require.Equal(t, vs[i], b.Version, k)
			}
			// One stale Expect: nothing of the batch is written, and the error names it.
			_, err = bs.PutBlobs(ctx, []adapters.BlobPut{
				{Key: "audit/1/b", Data: []byte("e2")},
				{Key: "machine/cutover/app", Expect: v0, Data: []byte("s2")}})
			var bc *adapters.BlobConflictError
			require.ErrorAs(t, err, &bc)
			require.Equal(t, "machine/cutover/app", bc.Key)
			require.Equal(t, vs[0], bc.Current)
			_, err = s.GetBlob(ctx, "audit/1/b")
			require.ErrorIs(t, err, adapters.ErrNotFound, "a refused batch writes nothing")
			b, err := s.GetBlob(ctx, "machine/cutover/app")
			require.NoError(t, err)
			require.Equal(t, "s1", string(b.Data))
			// A key twice, or one in the record namespace: refused whole.
			_, err = bs.PutBlobs(ctx, []adapters.BlobPut{{Key: "audit/1/c"}, {Key: "audit/1/c"}})
			require.ErrorContains(t, err, "put twice")
			_, err = bs.PutBlobs(ctx, []adapters.BlobPut{{Key: "audit/1/d"}, {Key: "xs/ns/app"}})
			require.ErrorContains(t, err, "record namespace")
			for _, k := range []string{"audit/1/c", "audit/1/d"} {
				_, err = s.GetBlob(ctx, k)
				require.ErrorIs(t, err, adapters.ErrNotFound, k)
			}
			if h.Reopen != nil {
				s = h.Reopen(t, s)
				for i, k := range []string{"machine/cutover/app", "audit/1/a"} {
					b, err := s.GetBlob(ctx, k)
					require.NoError(t, err, "%s lost after reopen", k)
					require.Equal(t, vs[i], b.Version, k)
				}
			}
		}},
		{"RacingBlobPutOneWinner", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx := t.Context()
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.PutBlob(ctx, "lease/x", 0, []byte("me"))
					if err == nil {
						mu.Lock()
						wins++
						mu.Unlock()
					} else if !errors.Is(err, adapters.ErrConflict) {
						t.Errorf("a losing PutBlob must conflict, got %v", err)
					}
				}()
			}
			wg.Wait()
			require.Equal(t, 1, wins)
		}},
		{"CancelledContextIsRefused", func(t TB, h StoreHarness) {
			s := h.Open(t)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := s.CAS(ctx, testDB, 0, SampleRecord("app", 1))
			require.ErrorIs(t, err, context.Canceled)
			_, err = s.Read(t.Context(), testDB)
			require.ErrorIs(t, err, adapters.ErrNotFound, "a cancelled CAS must not have written")
		}},
	}
}
