package controller

import (
	"context"
	"fmt"
	"log/slog"
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
	pollRequests(ctx, d, FailoverRequestKey(ref), "failover", log, func(req FailoverRequest) {
		d.runFailover(ctx, dc, ref, f, req, pushes, log.With("machine", "failover"))
	})
}

// runFailover runs (or resumes) one requested failover to its end, then files it in the
// history (requestrun.go): a failover filed already is never run again.
func (d *Controller) runFailover(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, req FailoverRequest, pushes chan<- configpush.Input, log *slog.Logger) {
	histKey := FailoverHistoryKey(ref, req.At)
	clear := []string{driver.SnapshotKey("failover", ref.String()), FailoverRequestKey(ref)}
	fresh, run := d.fresh(ctx, "failover", ref, histKey, req, clear, log)
	if !run {
		return
	}
	var start []failover.Input
	if fresh {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			log.Error("cannot read the record to start the failover", "err", err)
			return
		}
		start = []failover.Input{failover.Start{Record: rec, Shard: req.Shard, Promoted: req.Promoted, Role: dc.AppUser}}
	}
	handoff := &driver.PushHandoff{Inputs: pushes, Store: d.store, ID: ref.String(),
		Render:    func(r *shardmap.Record) (render.Files, error) { return RenderFiles(r, dc) },
		Instances: func() []string { return dc.RouterIDs() }}
	e := newEnding[failover.Done]()
	exec := &driver.FailoverExecutor{DB: ref, Store: d.guarded, Backend: f.backendLookup(ctx), Handoff: handoff.Hand, Logger: log,
		Vitess: f.Vitess, OnDone: e.end}
	if len(dc.Routers) == 0 {
		exec.Handoff = func(context.Context, *shardmap.Record) error { return nil } // no router to push to
	}
	audited := &driver.Audited[failover.Input, failover.Command]{Kind: "failover", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		OnResult: func(c failover.Command, in failover.Input, e driver.AuditEntry) { d.m.step("failover", e) }}
	if !runToEnd(ctx, d, driver.Failover(audited), ref.String(), log, start, e, nil) {
		return
	}
	done := e.done
	res := FailoverResult{Request: req, Outcome: done.Outcome.String(), Generation: done.Generation, Fenced: done.Fenced, Reason: done.Reason, Ended: time.Now().UnixMilli()}
	d.file(ctx, "failover", ref, histKey, res, clear,
		fmt.Sprintf("failover of %s ended: %s at generation %d (old primary fenced: %v) %s", req.Shard, res.Outcome, res.Generation, res.Fenced, res.Reason), log)
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
