package driver

import (
	"context"
	"fmt"
	"log/slog"

	"loam.dev/router/adapters"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// PreparedLister is the one thing the in-doubt monitor may do to a shard: list its prepared
// transactions. adapters.ShardBackend satisfies it; the executor is handed nothing more, so
// no code path from the monitor can fence, write, commit or roll back.
type PreparedLister interface {
	Prepared(ctx context.Context) ([]adapters.PreparedXact, error)
}

// AlertSink receives the monitor's alerts. Raise is an upsert by Alert.ID; Clear of an
// unknown id is not an error. Both may see the same request again (the monitor re-sends
// until acknowledged) and must treat it as one.
type AlertSink interface {
	Raise(ctx context.Context, a indoubt.Alert) error
	Clear(ctx context.Context, id string) error
}

// InDoubtExecutor executes the in-doubt monitor's commands.
type InDoubtExecutor struct {
	// Shard finds a shard's backend by the record's shard name (see Lookup).
	Shard  func(name string) (PreparedLister, bool)
	Roster adapters.Roster
	Alerts AlertSink
	Logger *slog.Logger
}

// Execute performs one command; see indoubt.Command for what each must do.
func (e *InDoubtExecutor) Execute(ctx context.Context, cmd indoubt.Command) (indoubt.Input, bool) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	switch c := cmd.(type) {
	case indoubt.ListPrepared:
		var xs []adapters.PreparedXact
		var err error
		if sh, ok := lookup(e.Shard, c.Shard); ok {
			xs, err = sh.Prepared(ctx)
		} else {
			err = fmt.Errorf("driver: unknown shard %q (not among the shards this driver was given)", c.Shard)
		}
		warn(log, err, "listing prepared transactions failed", "step", c.Step, "shard", c.Shard)
		p := indoubt.Prepared{Step: c.Step, Shard: c.Shard, Err: err}
		for _, x := range xs {
			var at int64
			if !x.Prepared.IsZero() {
				at = x.Prepared.UnixMilli()
			}
			p.Xacts = append(p.Xacts, indoubt.Xact{GID: x.GID, Prepared: at, Owner: x.Owner, Database: x.Database})
		}
		return p, true
	case indoubt.ListInstances:
		ps, err := e.Roster.Processes(ctx)
		warn(log, err, "listing router processes failed", "step", c.Step)
		r := indoubt.Roster{Step: c.Step, Err: err}
		for _, p := range ps {
			var at int64
			if !p.Started.IsZero() {
				at = p.Started.UnixMilli()
			}
			r.Processes = append(r.Processes, indoubt.Process{ID: p.ID, Started: at})
		}
		return r, true
	case indoubt.Alert:
		err := e.Alerts.Raise(ctx, c)
		warn(log, err, "raising an alert failed; the monitor sends it again", "step", c.Step, "alert", c.ID)
		return indoubt.Delivered{Step: c.Step, Err: err}, true
	case indoubt.ClearAlert:
		err := e.Alerts.Clear(ctx, c.ID)
		warn(log, err, "clearing an alert failed; the monitor sends it again", "step", c.Step, "alert", c.ID)
		return indoubt.Delivered{Step: c.Step, Err: err}, true
	}
	// Only a mutant build (-tags loam_mutant_indoubt_commit) has another command; no seam
	// given to this executor can carry it out.
	log.Error("in-doubt command this executor cannot carry out; dropped", "cmd", fmt.Sprintf("%T", cmd))
	return nil, false
}

// InDoubt is the Kind of the in-doubt monitor, executed by exec (an *InDoubtExecutor, or
// a wrapper around one).
func InDoubt(exec Executor[indoubt.Input, indoubt.Command], opts indoubt.Options) Kind[indoubt.Input, indoubt.Command, indoubt.Snapshot] {
	type M = Machine[indoubt.Input, indoubt.Command, indoubt.Snapshot]
	return Kind[indoubt.Input, indoubt.Command, indoubt.Snapshot]{
		Name:      "indoubt",
		New:       func() M { return indoubt.New(opts) },
		Restore:   func(s indoubt.Snapshot) (M, error) { return indoubt.Restore(s, opts) },
		Restarted: indoubt.Restarted{},
		Timer:     func(t machine.TimerFired) indoubt.Input { return indoubt.TimerFired(t) },
		Exec:      exec,
		Ordered: func(c indoubt.Command) bool {
			switch c.(type) {
			case indoubt.Alert, indoubt.ClearAlert:
				return true
			}
			return false
		},
	}
}

// LogAlerts is an AlertSink that writes alerts to a logger at error level: the sink of last
// resort, and the daemon's default until an alert manager is configured.
type LogAlerts struct{ Logger *slog.Logger }

// Raise logs the alert with every branch an operator must resolve.
func (l LogAlerts) Raise(ctx context.Context, a indoubt.Alert) error {
	l.logger().ErrorContext(ctx, "prepared transactions in doubt: resolve by the runbook", "alert", a.ID, "reason", a.Reason, "detail", a.String())
	return nil
}

// Clear logs that the alert resolved.
func (l LogAlerts) Clear(ctx context.Context, id string) error {
	l.logger().InfoContext(ctx, "in-doubt alert resolved", "alert", id)
	return nil
}

func (l LogAlerts) logger() *slog.Logger {
	if l.Logger == nil {
		return slog.Default()
	}
	return l.Logger
}
