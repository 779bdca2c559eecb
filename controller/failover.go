package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/failover"
)

// A failover is asked for like a cutover: `failover` writes a request blob, the active
// controller runs it to its end and files the outcome in the history.

// FailoverRequestKey is where a failover request waits for the controller,
// FailoverHistoryKey where its outcome is filed (by the request's time).
func FailoverRequestKey(ref adapters.DBRef) string { return "request/failover/" + ref.String() }
func FailoverHistoryKey(ref adapters.DBRef, at int64) string {
	return fmt.Sprintf("history/failover/%s/%020d", ref, at)
}

// FailoverRequest is what `failover` (Requests.Failover) stores.
type FailoverRequest struct {
	Shard    string           `json:"shard"`
	Promoted shardmap.Backend `json:"promoted"`
	By       string           `json:"by"`
	At       int64            `json:"at"`
}

// FailoverResult is a finished failover, kept in the history.
type FailoverResult struct {
	Request    FailoverRequest `json:"request"`
	Outcome    string          `json:"outcome"`
	Generation uint64          `json:"generation"`
	Fenced     bool            `json:"fenced"`
	Reason     string          `json:"reason,omitempty"`
	Ended      int64           `json:"ended"`
}

// runFailovers runs failover requests of the database one at a time until ctx ends or the
// daemon drains. pushes is the database's ConfigPush input, which a PgDog failover hands
// its new generation to.
func (d *Controller) runFailovers(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, pushes chan<- configpush.Input, log *slog.Logger) {
	poll := d.poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		req, _, err := GetJSON[FailoverRequest](ctx, d.store, FailoverRequestKey(ref))
		switch {
		case err == nil:
			d.runFailover(ctx, dc, ref, f, req, pushes, log.With("machine", "failover"))
		case !errors.Is(err, adapters.ErrNotFound) && ctx.Err() == nil:
			log.Warn("reading the failover request failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.drain:
			return
		case <-time.After(poll):
		}
	}
}

func (d *Controller) runFailover(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, req FailoverRequest, pushes chan<- configpush.Input, log *slog.Logger) {
	var start []failover.Input
	if _, err := d.store.GetBlob(ctx, driver.SnapshotKey("failover", ref.String())); errors.Is(err, adapters.ErrNotFound) {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			log.Error("cannot read the record to start the failover", "err", err)
			return
		}
		start = []failover.Input{failover.Start{Record: rec, Shard: req.Shard, Promoted: req.Promoted, Role: dc.AppUser}}
	} else if err != nil {
		log.Error("reading the failover snapshot failed", "err", err)
		return
	}
	handoff := &driver.PushHandoff{Inputs: pushes, Store: d.store, ID: ref.String(),
		Render:    func(r *shardmap.Record) (render.Files, error) { return RenderFiles(r, dc) },
		Instances: func() []string { return dc.RouterIDs() }}
	var done failover.Done
	var once sync.Once
	finished := make(chan struct{})
	exec := &driver.FailoverExecutor{DB: ref, Store: d.guarded, Backend: f.backendLookup(ctx), Handoff: handoff.Hand, Logger: log,
		Vitess: f.Vitess, OnDone: func(c failover.Done) { once.Do(func() { done = c; close(finished) }) }}
	if len(dc.Routers) == 0 {
		exec.Handoff = func(context.Context, *shardmap.Record) error { return nil } // no router to push to
	}
	audited := &driver.Audited[failover.Input, failover.Command]{Kind: "failover", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		OnResult: func(c failover.Command, in failover.Input, e driver.AuditEntry) { d.m.step("failover", e) }}
	inputs := make(chan failover.Input)
	go func() {
		select {
		case <-finished:
			close(inputs)
		case <-ctx.Done():
		}
	}()
	d.keepRunning(ctx, log, "failover", func() error {
		err := driver.Run(ctx, driver.Failover(audited), driver.Config[failover.Input]{
			ID: ref.String(), Store: d.guarded, Logger: log, Inputs: inputs, Drain: d.drain,
		}, start...)
		start = nil
		return err
	})
	select {
	case <-finished:
	default:
		return
	}
	res := FailoverResult{Request: req, Outcome: done.Outcome.String(), Generation: done.Generation, Fenced: done.Fenced, Reason: done.Reason, Ended: time.Now().UnixMilli()}
	data, _ := json.Marshal(res)
	if _, err := d.guarded.PutBlob(ctx, FailoverHistoryKey(ref, req.At), 0, data); err != nil && !errors.Is(err, adapters.ErrConflict) {
		log.Error("filing the failover failed", "err", err)
		return
	}
	for _, key := range []string{driver.SnapshotKey("failover", ref.String()), FailoverRequestKey(ref)} {
		if b, err := d.store.GetBlob(ctx, key); err == nil {
			_ = d.guarded.DeleteBlob(ctx, key, b.Version)
		}
	}
	_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "failover", ID: ref.String(),
		What: fmt.Sprintf("failover of %s ended: %s at generation %d (old primary fenced: %v) %s", req.Shard, res.Outcome, res.Generation, res.Fenced, res.Reason), Result: "ok"})
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
