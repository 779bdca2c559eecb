package adapters

import (
	"context"
	"time"

	"loam.dev/router/kernel/shardmap"
)

// ShardBackend is one shard's database server.
type ShardBackend interface {
	// Status reports role, read-only state, lag and position.
	Status(ctx context.Context) (BackendStatus, error)
	// FenceWrites stops role from writing: no new logins, and every session of the role
	// ended, verified before returning (§6.4 step 3). Idempotent.
	FenceWrites(ctx context.Context, role string) error
	// UnfenceWrites lets role log in again. Idempotent.
	UnfenceWrites(ctx context.Context, role string) error
	// Prepared lists prepared (two-phase) transactions. Read only: nothing in Loam Router
	// commits or rolls one back.
	Prepared(ctx context.Context) ([]PreparedXact, error)
	// Checksum digests the rows of table that belong to one shard under a shard function.
	Checksum(ctx context.Context, table string, by ShardFn) (TableDigest, error)
}

// Role is a backend's replication role.
type Role uint8

const (
	RolePrimary Role = iota + 1
	RoleStandby
)

func (r Role) String() string {
	switch r {
	case RolePrimary:
		return "primary"
	case RoleStandby:
		return "standby"
	}
	return "unknown"
}

// BackendStatus is a backend's answer to Status.
type BackendStatus struct {
	Role     Role
	ReadOnly bool
	// Lag is how far a standby's replay is behind (0 on a primary).
	Lag time.Duration
	// Position is the write position: a Postgres LSN ("16/B374D848") or a MySQL GTID set.
	Position string
	// Replayed is a standby's replay position (empty on a primary).
	Replayed string
}

// PreparedXact is one prepared transaction (Postgres pg_prepared_xacts, MySQL XA RECOVER).
type PreparedXact struct {
	GID      string
	Prepared time.Time // zero where the backend does not say (MySQL)
	Owner    string
	Database string
}

// ShardFn selects the rows of one shard: those whose key routes to Shard under Scheme,
// computed with the same kernel the routers' hash matches, so split verification checks
// exactly the routing function. A nil Scheme selects every row.
type ShardFn struct {
	Scheme shardmap.Scheme
	Shard  uint32
}

// TableDigest is an order-independent digest of a set of rows: equal for equal rows
// whatever their physical order, different (with overwhelming probability) when any row
// differs.
type TableDigest struct {
	Table string
	Rows  uint64
	Sum   [32]byte
}
