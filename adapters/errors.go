package adapters

import (
	"errors"
	"fmt"

	"loam.dev/router/kernel/shardmap"
)

// Sentinel errors. Implementations wrap them (or return typed errors whose Is matches them)
// so callers can branch with errors.Is whatever system answered.
var (
	// ErrNotFound: the record or blob does not exist.
	ErrNotFound = errors.New("adapters: not found")
	// ErrConflict: a compare-and-set lost; the typed error carries what is there now.
	ErrConflict = errors.New("adapters: compare-and-set conflict")
	// ErrClosed: the store or connection was closed by its owner.
	ErrClosed = errors.New("adapters: closed")
	// ErrFenced: the backend refused because the shard is fenced (for Postgres, SQLSTATE
	// 28000 on login after NOLOGIN, or 57P01 when the fence ended the session).
	ErrFenced = errors.New("adapters: shard is fenced")
	// ErrUnreachable: the peer could not be reached; the request may not have arrived.
	ErrUnreachable = errors.New("adapters: unreachable")
	// ErrCorrupt: stored data could not be decoded; nothing was changed.
	ErrCorrupt = errors.New("adapters: stored data is corrupt")
)

// ConflictError is returned by ShardMapStore.CAS when the stored version is not the one
// expected. Current is the record now stored (nil when there is none), so the caller can
// re-plan from it without another read.
type ConflictError struct {
	DB       DBRef
	Expected uint64
	Current  *shardmap.Record
}

func (e *ConflictError) Error() string {
	if e.Current == nil {
		return fmt.Sprintf("adapters: %s: expected version %d but there is no record (create with expect 0)", e.DB, e.Expected)
	}
	if e.Expected == 0 {
		return fmt.Sprintf("adapters: %s: expected no record but version %d exists (read it and CAS on its version)", e.DB, e.Current.Version)
	}
	return fmt.Sprintf("adapters: %s: expected version %d but the store has version %d (read it and re-plan)", e.DB, e.Expected, e.Current.Version)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// BlobConflictError is returned by BlobStore.PutBlob and DeleteBlob when the blob's version
// is not the one expected. Current is 0 when the blob does not exist.
type BlobConflictError struct {
	Key      string
	Expected uint64
	Current  uint64
}

func (e *BlobConflictError) Error() string {
	return fmt.Sprintf("adapters: blob %q: expected version %d but the store has %d", e.Key, e.Expected, e.Current)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *BlobConflictError) Is(target error) bool { return target == ErrConflict }

// BackendError is an error from a shard backend, keeping the backend's own code (a
// SQLSTATE such as "28000", or a MySQL error number such as "4151").
type BackendError struct {
	Backend string // host:port
	Op      string // the seam method, e.g. "FenceWrites"
	Code    string
	Err     error
	// Fenced marks errors that mean the fence refused the request (see ErrFenced).
	Fenced bool
}

func (e *BackendError) Error() string {
	code := ""
	if e.Code != "" {
		code = " [" + e.Code + "]"
	}
	return fmt.Sprintf("%s %s%s: %v", e.Backend, e.Op, code, e.Err)
}

func (e *BackendError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFenced) true for fence refusals.
func (e *BackendError) Is(target error) bool { return target == ErrFenced && e.Fenced }

// RouterError is an error from a router instance, keeping the router's code (for PgDog's
// admin database, a SQLSTATE such as "08P01" for a command it could not parse).
type RouterError struct {
	Instance string
	Op       string // "Apply", "Pause", ...
	Code     string
	Err      error
}

func (e *RouterError) Error() string {
	code := ""
	if e.Code != "" {
		code = " [" + e.Code + "]"
	}
	return fmt.Sprintf("router %s %s%s: %v", e.Instance, e.Op, code, e.Err)
}

func (e *RouterError) Unwrap() error { return e.Err }
