package adapters

import (
	"context"
	"time"
)

// Roster lists a database's live router processes, for the in-doubt monitor: a prepared
// transaction whose coordinator process is gone, or restarted since it prepared, will not
// be resolved by it.
type Roster interface {
	Processes(ctx context.Context) ([]RouterProcess, error)
}

// RouterProcess is one live router process.
type RouterProcess struct {
	// ID is the instance id the process writes into its two-phase gids: PgDog's SHOW
	// INSTANCE_ID (its NODE_ID, or random hex drawn when the process started).
	ID string
	// Started is when the process started (for a Kubernetes pod, its container's
	// state.running.startedAt); zero when unknown.
	Started time.Time
}
