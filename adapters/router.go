package adapters

import (
	"context"
	"time"

	"loam.dev/router/kernel/render"
)

// RouterInstance is one router process. For PgDog it is an instance's admin database;
// the reference router (refrouter) and the simulator's model implement it too.
type RouterInstance interface {
	// ID names the instance (a pod name, or PgDog's NODE_ID).
	ID() string
	// Apply makes the instance route by generation: it writes files where the instance
	// reads them (PgDog re-reads only the files it was started with) and reloads. It
	// returns what the instance reports afterwards.
	Apply(ctx context.Context, generation uint64, files render.Files) (Applied, error)
	// Pause holds new queries for database (PgDog: PAUSE <db>); they queue, not fail.
	Pause(ctx context.Context, database string) error
	// Resume releases what Pause held (PgDog: RESUME <db>).
	Resume(ctx context.Context, database string) error
	// Observe reports what the instance shows of itself.
	Observe(ctx context.Context) (Observed, error)
}

// Applied is an instance's answer to Apply.
type Applied struct {
	// Generation is the generation the instance now routes by, as far as it can be
	// told (see Observed.GenerationKnown).
	Generation uint64
}

// Observed is what an instance shows of itself.
type Observed struct {
	Version string // the router's version string
	// Generation is the routing generation the instance has loaded. PgDog has no notion
	// of a generation; its adapter infers it from what SHOW POOLS reveals of the rendered
	// files, and says so with GenerationKnown = false when it cannot.
	Generation      uint64
	GenerationKnown bool
	Paused          []string // databases currently paused
	Peers           []string
	Tasks           []Task
}

// Task is a long-running job on an instance (PgDog's SHOW TASKS).
type Task struct {
	ID          int64
	Kind        string // e.g. "reshard", "replication"
	Status      string // started, running, finished, cancelling, cancelled, failed: <msg>
	InnerStatus string // e.g. "syncing data", "replicating"
	Elapsed     time.Duration
}
