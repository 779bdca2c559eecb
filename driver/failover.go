package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/failover"
)

// ErrNoVitess is returned for a Reparent when the executor was given no Vitess control.
var ErrNoVitess = errors.New("driver: no Vitess control (give FailoverExecutor.Vitess, e.g. adapters/vtctld)")

// ErrNoHandoff is returned for a Push when the executor was given no way to reach ConfigPush.
var ErrNoHandoff = errors.New("driver: no ConfigPush hand-off (give FailoverExecutor.Handoff, e.g. a PushHandoff's Hand)")

// FailoverExecutor executes failover commands: FenceOld on the old primary's ShardBackend,
// Reparent through Vitess (TabletExternallyReparented), WriteRecord on the Store, and Push
// through Handoff, which gives the stored generation to ConfigPush.
type FailoverExecutor struct {
	DB    adapters.DBRef
	Store adapters.ShardMapStore
	// Backend finds the old primary's server by its host, port and database (see
	// BackendKey). The old primary is usually down: its fence failing is expected.
	Backend func(key string) (adapters.ShardBackend, bool)
	// Vitess reaches vtctld; needed for Vitess keyspaces only.
	Vitess adapters.VitessControl
	// Handoff gives rec, just stored, to ConfigPush, and returns nil once ConfigPush has
	// taken it (a PushHandoff's Hand; or anything that starts or feeds a ConfigPush run).
	// Needed for PgDog databases only. It may be called again with the same generation
	// (after a restart, or when an earlier call failed) and must treat that as one push.
	Handoff func(ctx context.Context, rec *shardmap.Record) error
	// OnDone, when set, receives the failover's end (it is logged either way).
	OnDone func(failover.Done)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Execute performs one command; see failover.Command for what each must do.
func (e *FailoverExecutor) Execute(ctx context.Context, cmd failover.Command) (failover.Input, bool) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	switch c := cmd.(type) {
	case failover.FenceOld:
		b, err := e.backend(c.Backend)
		if err == nil {
			err = b.FenceWrites(ctx, c.Role)
		}
		warn(log, err, "fencing the old primary failed", "step", c.Step, "attempt", c.Attempt, "shard", c.Shard, "backend", BackendKey(c.Backend))
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case failover.Reparent:
		err := ErrNoVitess
		if e.Vitess != nil {
			var r adapters.Reparented
			r, err = e.Vitess.TabletExternallyReparented(ctx, c.Keyspace, c.Shard, c.Tablet)
			if err == nil {
				log.Info("Vitess reparented the shard", "step", c.Step, "keyspace", r.Keyspace, "shard", r.Shard, "old", r.OldPrimary, "new", r.NewPrimary)
			}
		}
		warn(log, err, "TabletExternallyReparented failed", "step", c.Step, "attempt", c.Attempt, "keyspace", c.Keyspace, "shard", c.Shard, "tablet", c.Tablet)
		// A tablet of another shard stays one: retrying cannot help, the failover must
		// end and say so. Every other error (vtctld down, the tablet's MySQL not yet
		// writable: adapters.ErrNotWritable) may clear, and is retried.
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err, Permanent: errors.Is(err, adapters.ErrWrongShard)}, true
	case failover.WriteRecord:
		v, err := e.Store.CAS(ctx, e.DB, c.Expect, c.Record)
		var conflict *adapters.ConflictError
		if errors.As(err, &conflict) {
			return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Conflict: conflict.Current, Err: err}, true
		}
		warn(log, err, "writing the record failed", "step", c.Step, "attempt", c.Attempt)
		return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Version: v, Err: err}, true
	case failover.Push:
		err := ErrNoHandoff
		if e.Handoff != nil {
			err = e.Handoff(ctx, c.Record)
		}
		warn(log, err, "handing the generation to ConfigPush failed", "step", c.Step, "attempt", c.Attempt, "generation", c.Generation)
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case failover.Alert:
		log.Error("failover needs an operator", "step", c.Step, "reason", c.Reason)
		return nil, false
	case failover.Done:
		level := slog.LevelInfo
		if c.Outcome != failover.Repointed || !c.Fenced {
			level = slog.LevelError
		}
		log.Log(ctx, level, "failover ended", "outcome", c.String())
		if e.OnDone != nil {
			e.OnDone(c)
		}
		return nil, false
	}
	log.Error("failover command this executor does not know; dropped", "cmd", fmt.Sprintf("%T", cmd))
	return nil, false
}

func (e *FailoverExecutor) backend(b shardmap.Backend) (adapters.ShardBackend, error) {
	if sb, ok := lookup(e.Backend, BackendKey(b)); ok {
		return sb, nil
	}
	return nil, fmt.Errorf("%w %s (not among the backends this driver was given)", ErrUnknownBackend, BackendKey(b))
}

// Failover is the Kind of the failover machine, executed by exec (a *FailoverExecutor, or
// a wrapper around one). Alerts and the Done report reach the executor in issue order.
func Failover(exec Executor[failover.Input, failover.Command]) Kind[failover.Input, failover.Command, failover.Snapshot] {
	type M = Machine[failover.Input, failover.Command, failover.Snapshot]
	return Kind[failover.Input, failover.Command, failover.Snapshot]{
		Name:      "failover",
		New:       func() M { return failover.New() },
		Restore:   func(s failover.Snapshot) (M, error) { return failover.Restore(s) },
		Restarted: failover.Restarted{},
		Timer:     func(t machine.TimerFired) failover.Input { return failover.TimerFired(t) },
		Exec:      exec,
		Ordered: func(c failover.Command) bool {
			switch c.(type) {
			case failover.Alert, failover.Done:
				return true
			}
			return false
		},
	}
}

// PushHandoff hands a generation stored by a failover to a ConfigPush run of the same
// database: the Run of the ConfigPush kind whose Config.Inputs is Inputs. Its Hand is a
// FailoverExecutor.Handoff.
type PushHandoff struct {
	// Inputs is the ConfigPush run's Config.Inputs.
	Inputs chan<- configpush.Input
	// Render renders a record into the routers' files (kernel/render.PgDog with the
	// deployment's credentials and options).
	Render func(*shardmap.Record) (render.Files, error)
	// Instances lists the router instance ids to reload.
	Instances func() []string
	// Store and ID are the ConfigPush run's Config.Store and Config.ID. With Store set,
	// Hand returns only once that run has saved a snapshot holding this generation or a
	// newer one, so a daemon killed just after loses nothing: the restored ConfigPush
	// carries the push on. With Store nil, Hand returns once the push is in Inputs.
	Store adapters.BlobStore
	ID    string
	// PollEvery is how often the snapshot is read while Hand waits (default 10ms).
	PollEvery time.Duration
}

// Hand renders rec, sends the push to the ConfigPush run and waits until the run has
// taken it (see Store), or ctx ends.
func (h *PushHandoff) Hand(ctx context.Context, rec *shardmap.Record) error {
	if h.Render == nil || h.Instances == nil || h.Inputs == nil {
		return errors.New("driver: PushHandoff needs Inputs, Render and Instances")
	}
	files, err := h.Render(rec)
	if err != nil {
		return fmt.Errorf("driver: rendering generation %d for ConfigPush: %w", rec.Generation, err)
	}
	ids := h.Instances()
	if len(ids) == 0 {
		return fmt.Errorf("driver: no router instance to push generation %d to (PushHandoff.Instances is empty)", rec.Generation)
	}
	select {
	case h.Inputs <- configpush.Push{Record: rec.Clone(), Generation: rec.Generation, Files: files, Instances: ids}:
	case <-ctx.Done():
		return fmt.Errorf("driver: ConfigPush did not take generation %d (is its run going?): %w", rec.Generation, context.Cause(ctx))
	}
	if h.Store == nil {
		return nil
	}
	every := h.PollEvery
	if every <= 0 {
		every = 10 * time.Millisecond
	}
	key := SnapshotKey("configpush", h.ID)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		b, err := h.Store.GetBlob(ctx, key)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("driver: ConfigPush %s has not saved generation %d (it refused the push, or its run is stuck; see its log): %w", h.ID, rec.Generation, context.Cause(ctx))
		case err == nil:
			var s configpush.Snapshot
			if err := json.Unmarshal(b.Data, &s); err != nil {
				return fmt.Errorf("driver: decoding the ConfigPush snapshot %s: %w", key, err)
			}
			if s.Written >= rec.Generation || s.Push != nil && s.Push.Generation >= rec.Generation {
				return nil
			}
		case !errors.Is(err, adapters.ErrNotFound):
			return fmt.Errorf("driver: reading the ConfigPush snapshot %s: %w", key, err)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}
