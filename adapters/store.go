package adapters

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"loam.dev/router/kernel/shardmap"
)

// DBRef names one mapped database: records live under xs/<Namespace>/<Database>.
type DBRef struct {
	Namespace string
	Database  string
}

func (d DBRef) String() string { return d.Namespace + "/" + d.Database }

// Validate refuses names that would not make a clean key: empty, or containing '/' or
// control characters.
func (d DBRef) Validate() error {
	for what, s := range map[string]string{"namespace": d.Namespace, "database": d.Database} {
		if s == "" {
			return fmt.Errorf("adapters: db ref %q: %s is empty", d, what)
		}
		if strings.ContainsAny(s, "/\x00") || strings.IndexFunc(s, func(r rune) bool { return r < ' ' }) >= 0 {
			return fmt.Errorf("adapters: db ref %q: %s %q may not contain '/' or control characters", d, what, s)
		}
	}
	return nil
}

// Key is the store key of the record: "xs/<ns>/<db>".
func (d DBRef) Key() string { return "xs/" + d.Namespace + "/" + d.Database }

// ShardMapStore keeps shard map records. Every write is a compare-and-set on Version, so two
// controllers can never both believe they wrote the same version.
type ShardMapStore interface {
	// Read returns the stored record, or ErrNotFound.
	Read(ctx context.Context, db DBRef) (*shardmap.Record, error)
	// CAS stores next if the stored version is expect (0: no record yet), and returns the
	// new version, expect+1. The stored record is a copy of next with Version set; next
	// itself is not modified. A stale expect returns *ConflictError with the current
	// record. next must pass Validate, and ValidateNext against the stored record: the
	// store is the last place a bad record can be stopped.
	CAS(ctx context.Context, db DBRef, expect uint64, next *shardmap.Record) (uint64, error)
	// Watch returns the first stored record whose version is greater than after,
	// waiting for it without polling where the store can; it returns the context's
	// error when ctx ends first.
	Watch(ctx context.Context, db DBRef, after uint64) (*shardmap.Record, error)
}

// CheckCAS is the write check every ShardMapStore runs inside its compare-and-set, with
// current the stored record (nil when there is none). Sharing it keeps the stores'
// answers identical.
func CheckCAS(db DBRef, expect uint64, current, next *shardmap.Record) error {
	if err := db.Validate(); err != nil {
		return err
	}
	if next == nil {
		return fmt.Errorf("adapters: %s: CAS of a nil record", db)
	}
	var have uint64
	if current != nil {
		have = current.Version
	}
	if have != expect {
		return &ConflictError{DB: db, Expected: expect, Current: current.Clone()}
	}
	if err := next.Validate(); err != nil {
		return fmt.Errorf("adapters: %s: refusing to store an invalid record: %w", db, err)
	}
	if current != nil {
		if err := next.ValidateNext(current); err != nil {
			return fmt.Errorf("adapters: %s: refusing to store version %d: %w", db, expect+1, err)
		}
	}
	return nil
}

// EncodeCAS runs CheckCAS and returns what the store writes: the encoding of a copy of next
// at version expect+1, and that version. Every ShardMapStore's CAS stores exactly this.
func EncodeCAS(db DBRef, expect uint64, current, next *shardmap.Record) ([]byte, uint64, error) {
	if err := CheckCAS(db, expect, current, next); err != nil {
		return nil, 0, err
	}
	stored := next.Clone()
	stored.Version = expect + 1
	enc, err := stored.MarshalBinary()
	if err != nil {
		return nil, 0, fmt.Errorf("adapters: %s: encoding version %d: %w", db, stored.Version, err)
	}
	return enc, stored.Version, nil
}

// Blob is a small versioned value in a BlobStore.
type Blob struct {
	Key     string
	Version uint64
	Data    []byte
}

// BlobStore keeps small versioned blobs: machine snapshots (so a restarted driver resumes),
// the active controller's lease, and similar. Versions come from one counter per store, so
// a version is never reused for a key, even after the key is deleted and created again.
type BlobStore interface {
	// GetBlob returns the blob, or ErrNotFound.
	GetBlob(ctx context.Context, key string) (Blob, error)
	// PutBlob stores data if the blob's version is expect (0: the blob must not exist) and
	// returns its new version; otherwise *BlobConflictError.
	PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error)
	// DeleteBlob removes the blob if its version is expect; otherwise *BlobConflictError
	// (deleting a missing blob with expect 0 is not an error).
	DeleteBlob(ctx context.Context, key string, expect uint64) error
	// ListBlobs returns every blob whose key starts with prefix, sorted by key.
	ListBlobs(ctx context.Context, prefix string) ([]Blob, error)
}

// BlobPut is one blob of a BlobBatcher's PutBlobs: data stored at key if the blob's
// version is Expect (0: the blob must not exist).
type BlobPut struct {
	Key    string
	Expect uint64
	Data   []byte
}

// BlobBatcher is an optional interface of a BlobStore that writes several blobs in one
// transaction (one fsync on bbolt): all of them, or none. The driver writes a step's
// snapshot and its audit entries so, in one write instead of two in series.
type BlobBatcher interface {
	// PutBlobs stores every put, each under its own Expect as PutBlob does, and returns
	// their new versions in order. If any put's Expect does not hold it writes nothing and
	// returns that put's *BlobConflictError. A store that wraps another and cannot batch
	// through it returns an error matching errors.ErrUnsupported, having written nothing.
	PutBlobs(ctx context.Context, puts []BlobPut) ([]uint64, error)
}

// PutBlobs writes puts in one transaction of s, or returns an error matching
// errors.ErrUnsupported (having written nothing) when s cannot.
func PutBlobs(ctx context.Context, s BlobStore, puts []BlobPut) ([]uint64, error) {
	b, ok := s.(BlobBatcher)
	if !ok {
		return nil, fmt.Errorf("adapters: %T writes one blob at a time: %w", s, errors.ErrUnsupported)
	}
	return b.PutBlobs(ctx, puts)
}

// CheckBlobPuts is the check a BlobBatcher makes before it writes anything: every key is a
// blob key (CheckBlobKey), no key is put twice, and every Expect is the blob's current
// version (current reads it, 0 when the blob does not exist); else the first failing
// put's error, a *BlobConflictError for a version.
func CheckBlobPuts(puts []BlobPut, current func(key string) uint64) error {
	seen := make(map[string]bool, len(puts))
	for _, p := range puts {
		if err := CheckBlobKey(p.Key); err != nil {
			return err
		}
		if seen[p.Key] {
			return fmt.Errorf("adapters: blob %q is put twice in one batch; put it once", p.Key)
		}
		seen[p.Key] = true
		if cur := current(p.Key); cur != p.Expect {
			return &BlobConflictError{Key: p.Key, Expected: p.Expect, Current: cur}
		}
	}
	return nil
}

// CheckBlobKey refuses empty keys and keys in the record namespace "xs/".
func CheckBlobKey(key string) error {
	if key == "" {
		return errors.New("adapters: blob key is empty")
	}
	if strings.HasPrefix(key, "xs/") {
		return fmt.Errorf("adapters: blob key %q is in the record namespace xs/; use another prefix", key)
	}
	return nil
}
