package adapters

import (
	"context"
	"errors"
	"time"
)

// ErrLeaseLost: the store refused a write made under a lease tenure that has ended (the
// lease expired on the store's clock, was revoked, or another holder took it). The store
// checked the lease in the same transaction as the write, so nothing was written.
var ErrLeaseLost = errors.New("adapters: the lease this write was made under is no longer held")

// LeaseStore is an optional interface of a store that keeps the controller lease itself,
// on its own clock, and can make every write conditional on it (etcd: a lease kept alive by
// the client, a key attached to it, and transactions that compare that key's revision).
// driver.Lease uses it when the store provides it, instead of a blob renewed by
// compare-and-set and timed on each controller's clock.
type LeaseStore interface {
	// Campaign waits until holder holds the lease named key, with the given TTL, or ctx
	// ends. value is what a reader of the lease key (GetBlob(key)) sees while it is held.
	Campaign(ctx context.Context, key string, ttl time.Duration, value []byte) (Tenure, error)
}

// Tenure is one holding of a store-kept lease.
type Tenure interface {
	// Epoch is unique to this tenure and greater than every earlier tenure's epoch of the
	// same key; it is also the lease blob's version.
	Epoch() uint64
	// ValidUntil is the latest moment this process may still believe it holds the lease:
	// one TTL (less a margin for clock-rate error) after it sent its last acknowledged
	// renewal. The store counts from when it received that renewal, which is later.
	ValidUntil() time.Time
	// Done is closed when the tenure has ended: the store reported the lease gone, or no
	// renewal was acknowledged before ValidUntil. Err then says why.
	Done() <-chan struct{}
	Err() error
	// Fenced is a view of the store whose every write is refused by the store, atomically
	// with the write, with an error matching ErrLeaseLost once this tenure has ended. Reads
	// pass through.
	Fenced() interface {
		ShardMapStore
		BlobStore
	}
	// Release ends the tenure and gives the lease up at once, so a standby need not wait
	// for it to expire.
	Release(ctx context.Context) error
}
