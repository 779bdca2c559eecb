package boltstore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/conformance"
)

func open(t conformance.TB, path string) *boltstore.Store {
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func harness(t *testing.T) conformance.StoreHarness {
	return conformance.StoreHarness{
		Open: func(tb conformance.TB) conformance.Store {
			return open(tb, filepath.Join(t.TempDir(), "loam.db"))
		},
		Reopen: func(tb conformance.TB, s conformance.Store) conformance.Store {
			bs := s.(*boltstore.Store)
			require.NoError(tb, bs.Close())
			return open(tb, bs.Path())
		},
	}
}

func TestStoreContract(t *testing.T) { conformance.RunStoreSuite(t, harness(t)) }

var db = adapters.DBRef{Namespace: "ns", Database: "app"}

// written returns the path of a closed store holding one record and one blob.
func written(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "loam.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	_, err = s.CAS(context.Background(), db, 0, conformance.SampleRecord("app", 1))
	require.NoError(t, err)
	_, err = s.PutBlob(context.Background(), "snap/x", 0, []byte("snapshot"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return path
}

func requireCorrupt(t *testing.T, path string) {
	t.Helper()
	_, err := boltstore.Open(path, &boltstore.Options{LockTimeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, adapters.ErrCorrupt)
	require.ErrorContains(t, err, path, "the error names the file")
	require.ErrorContains(t, err, "backup", "the error says what to do")
}

func TestTruncatedFileIsRefused(t *testing.T) {
	path := written(t)
	for _, size := range []int64{0 + 1, 100, 4096, 8192 + 100} {
		require.NoError(t, os.Truncate(path, size))
		requireCorrupt(t, path)
	}
}

func TestGarbageFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loam.db")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("not a bolt file "), 2048), 0o600))
	requireCorrupt(t, path)
}

func TestBothMetaPagesDamagedIsRefused(t *testing.T) {
	path := written(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	page := os.Getpagesize()
	for _, off := range []int{16, page + 16} { // inside each meta page, past the page header
		for i := range 32 {
			data[off+i] ^= 0xff
		}
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	requireCorrupt(t, path)
}

func TestDamagedRecordIsRefusedAtOpen(t *testing.T) {
	path := written(t)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	// The record's encoding starts with its format byte, then version 1 and generation 1.
	// Copy-on-write leaves stale copies in free pages; damage every copy.
	enc := []byte{1, 1, 1, 1, 1, 3, 'a', 'p', 'p'}
	require.Positive(t, bytes.Count(data, enc), "record bytes not found in the file")
	data = bytes.ReplaceAll(data, enc, append([]byte{0x7f}, enc[1:]...)) // an unknown format byte
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err = boltstore.Open(path, nil)
	require.ErrorIs(t, err, adapters.ErrCorrupt)
	require.ErrorContains(t, err, "xs/ns/app")
}

func TestLockedFileNamesTheCause(t *testing.T) {
	path := written(t)
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = boltstore.Open(path, &boltstore.Options{LockTimeout: 100 * time.Millisecond})
	require.ErrorIs(t, err, boltstore.ErrLocked)
	require.ErrorContains(t, err, path+" is locked by another process")
	require.ErrorContains(t, err, "after 100ms", "the error says how long it waited")
}

func TestClosedStoreSaysSo(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "loam.db"))
	require.NoError(t, s.Close())
	_, err := s.Read(context.Background(), db)
	require.ErrorIs(t, err, adapters.ErrClosed)
	_, err = s.CAS(context.Background(), db, 0, conformance.SampleRecord("app", 1))
	require.ErrorIs(t, err, adapters.ErrClosed)
	_, err = s.Watch(context.Background(), db, 0)
	require.ErrorIs(t, err, adapters.ErrClosed)
}

// TestDamagedFileIsNotWritten: a file that fails its check is refused before anything is
// written to it (a read-write transaction commits a meta page and the freelist), so the
// damage can still be examined or repaired as it was found.
func TestDamagedFileIsNotWritten(t *testing.T) {
	page := os.Getpagesize()
	refused := 0
	for pg := range 8 {
		for _, off := range []int{16, 24, 40, 200} {
			path := written(t)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			if (pg+1)*page > len(data) {
				continue
			}
			for i := off; i < off+16; i++ {
				data[pg*page+i] ^= 0x5a
			}
			require.NoError(t, os.WriteFile(path, data, 0o600))
			s, err := boltstore.Open(path, &boltstore.Options{LockTimeout: 200 * time.Millisecond})
			if err == nil {
				s.Close()
				continue // damage bbolt recovers from (one meta page) or never reads (a free page)
			}
			refused++
			require.ErrorIs(t, err, adapters.ErrCorrupt, "page %d offset %d", pg, off)
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			require.True(t, bytes.Equal(data, after), "page %d offset %d damaged: the refused file was written to (%v)", pg, off, err)
		}
	}
	require.Positive(t, refused, "some damage is refused")
}

// TestEmptyFileIsRefused: an existing file of zero bytes (a failed copy, a full disk) is not
// taken for a new store: starting empty over it would lose the records it was meant to hold.
func TestEmptyFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loam.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err := boltstore.Open(path, nil)
	require.ErrorIs(t, err, adapters.ErrCorrupt)
	require.ErrorContains(t, err, "empty")
	require.ErrorContains(t, err, path)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Zero(t, st.Size(), "nothing was written to it")
}
