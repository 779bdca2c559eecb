package tikv_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/tikv"
	"loam.dev/router/adapters/tikv/tikvtest"
	"loam.dev/router/conformance"
)

var fastPoll = &tikv.Options{PollMin: 2 * time.Millisecond, PollMax: 20 * time.Millisecond}

func openMock(t conformance.TB) *tikv.Store {
	s, err := tikvtest.New(fastPoll)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestStoreContract runs the store contract against client-go's in-process TiKV.
func TestStoreContract(t *testing.T) {
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store { return openMock(t) },
	})
}

// TestRealStoreContract runs the contract against a real cluster when LOAM_TIKV_PD names
// its PD endpoints (comma-separated). Each case gets its own namespace prefix by database
// name only, so run it against a scratch cluster.
func TestRealStoreContract(t *testing.T) {
	pd := os.Getenv("LOAM_TIKV_PD")
	if pd == "" {
		t.Skip("skipped: needs a TiKV cluster (set LOAM_TIKV_PD=host:2379); the in-process store runs in TestStoreContract")
	}
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store {
			s, err := tikv.Open(strings.Split(pd, ","), fastPoll)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	})
}

// TestWriteConflictBecomesConflictError: two transactions pass the version check, the
// second commit collides; the loser gets *ConflictError with the winner's record.
func TestWriteConflictBecomesConflictError(t *testing.T) {
	s := openMock(t)
	ctx := context.Background()
	db := adapters.DBRef{Namespace: "ns", Database: "app"}
	_, err := s.CAS(ctx, db, 0, conformance.SampleRecord("app", 1))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins int
	var conflicts []*adapters.ConflictError
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := conformance.SampleRecord("app", 2)
			rec.Shards[0].Backend.Port = uint16(6000 + i)
			_, err := s.CAS(ctx, db, 1, rec)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
				return
			}
			ce, ok := err.(*adapters.ConflictError)
			require.True(t, ok, "want *ConflictError, got %T %v", err, err)
			conflicts = append(conflicts, ce)
		}()
	}
	wg.Wait()
	require.Equal(t, 1, wins)
	for _, ce := range conflicts {
		require.Equal(t, uint64(2), ce.Current.Version)
	}
}

// TestLoggerNeverWritesStdout: client-go logs on conflicts and on close; none of it may
// reach standard output, where the CLI prints results.
func TestLoggerNeverWritesStdout(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()

	s, err := tikvtest.New(nil)
	if err == nil {
		ctx := context.Background()
		db := adapters.DBRef{Namespace: "ns", Database: "app"}
		_, _ = s.CAS(ctx, db, 0, conformance.SampleRecord("app", 1))
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = s.CAS(ctx, db, 1, conformance.SampleRecord("app", 2)) }()
		}
		wg.Wait()
		_ = s.Close()
	}
	os.Stdout = stdout
	require.NoError(t, w.Close())
	require.NoError(t, err)
	require.Empty(t, <-out, "client-go wrote to standard output")
}

// BenchmarkCASBoltVsTiKV interleaves one CAS on the bolt store and one on the in-process
// TiKV per iteration and reports both rates and the tikv/bolt time ratio.
func BenchmarkCASBoltVsTiKV(b *testing.B) {
	bolt, err := boltstore.Open(filepath.Join(b.TempDir(), "loam.db"), nil)
	require.NoError(b, err)
	defer bolt.Close()
	kv, err := tikvtest.New(nil)
	require.NoError(b, err)
	defer kv.Close()
	spent := conformance.InterleaveCAS(b, bolt, kv)
	n := float64(b.N)
	b.ReportMetric(n/spent[0].Seconds(), "bolt-CAS/s")
	b.ReportMetric(n/spent[1].Seconds(), "tikv-CAS/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "tikv/bolt")
}
