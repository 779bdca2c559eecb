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
)

// Every request an operator files (a cutover, a Vitess cutover, a failover) is handled the
// same way: the active controller reads it, decides how its machine starts (resumed from its
// snapshot, afresh, or not at all because it was filed already), runs the machine to its end
// forwarding the operator's decisions, files the outcome in the history and clears the
// request. The helpers here are that one way; cutover.go, vreshard.go and failover.go say
// only what differs.

// pollRequests reads the request at key every poll interval and hands it to run, until ctx
// ends or the daemon drains.
func pollRequests[R any](ctx context.Context, d *Controller, key, what string, log *slog.Logger, run func(R)) {
	poll := d.poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		req, _, err := GetJSON[R](ctx, d.store, key)
		switch {
		case err == nil:
			run(req)
		case !errors.Is(err, adapters.ErrNotFound) && ctx.Err() == nil:
			log.Warn("reading the "+what+" request failed", "err", err)
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

// ending is a machine's end, reported once by its executor's OnDone.
type ending[D any] struct {
	once sync.Once
	done D
	ch   chan struct{}
}

func newEnding[D any]() *ending[D] { return &ending[D]{ch: make(chan struct{})} }

func (e *ending[D]) end(d D) { e.once.Do(func() { e.done = d; close(e.ch) }) }

func (e *ending[D]) ended() bool {
	select {
	case <-e.ch:
		return true
	default:
		return false
	}
}

// fresh says how the machine of a request starts: false when its snapshot is stored (the
// run resumes it); true when there is none and the request was never filed. run is false
// when the machine must not run now: the request was filed already (a crash between filing
// and clearing it; cleared here, never run again) or the store could not say.
func (d *Controller) fresh(ctx context.Context, machine string, ref adapters.DBRef, histKey string, req any, clear []string, log *slog.Logger) (fresh, run bool) {
	_, err := d.store.GetBlob(ctx, driver.SnapshotKey(machine, ref.String()))
	switch {
	case err == nil:
		return false, true
	case !errors.Is(err, adapters.ErrNotFound):
		log.Error("reading the "+machine+" snapshot failed", "err", err)
		return false, false
	}
	b, err := d.store.GetBlob(ctx, histKey)
	switch {
	case err == nil:
		var h struct {
			Request json.RawMessage `json:"request"`
		}
		if json.Unmarshal(b.Data, &h) == nil && sameJSON(h.Request, req) {
			log.Info("the request had ended and was filed; clearing it", "history", histKey)
			d.clearKeys(ctx, clear, log)
			return false, false
		}
	case !errors.Is(err, adapters.ErrNotFound):
		log.Error("cannot read the history; not starting until it can be read (a filed request is never run again)", "key", histKey, "err", err)
		return false, false
	}
	return true, true
}

// sameJSON reports whether the stored JSON a and the value b encode the same (another
// request from the same generation, after a rollback, is a new request).
func sameJSON(a json.RawMessage, b any) bool {
	jb, err := json.Marshal(b)
	if err != nil {
		return false
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(jb, &vb) == nil && fmt.Sprint(va) == fmt.Sprint(vb)
}

// runToEnd runs kind (from its snapshot, or from start when it has none) until the machine
// ends (e), ctx ends or the daemon drains, and reports whether it ended. next, when set, is
// asked every second for an input from outside (the operator's decision) until the end.
func runToEnd[In, Cmd, Snap, D any](ctx context.Context, d *Controller, kind driver.Kind[In, Cmd, Snap], id string, log *slog.Logger,
	start []In, e *ending[D], next func(context.Context) (In, bool)) bool {
	inputs := make(chan In)
	// One goroutine owns inputs: it forwards and, once the machine has ended, closes it, so
	// the run returns when the machine is idle.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if next != nil {
				if in, ok := next(ctx); ok {
					select {
					case inputs <- in:
					case <-e.ch:
						close(inputs)
						return
					case <-ctx.Done():
						return
					}
				}
			}
			select {
			case <-t.C:
			case <-e.ch:
				close(inputs)
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	d.keepRunning(ctx, log, kind.Name, func() error {
		err := driver.Run(ctx, kind, driver.Config[In]{ID: id, Store: d.guarded, Logger: log, Inputs: inputs, Drain: d.drain}, start...)
		start = nil // a run that stopped resumes from its snapshot
		return err
	})
	return e.ended()
}

// file moves an ended request's outcome into the history at histKey (created once: what an
// earlier filing wrote stays), clears keys in order (the request last, so a crash in between
// leaves a request that fresh finds filed) and notes what in the audit log. It reports
// whether all of it was done; if not, the next poll files it again.
func (d *Controller) file(ctx context.Context, machine string, ref adapters.DBRef, histKey string, result any, clear []string, what string, log *slog.Logger) bool {
	data, err := json.Marshal(result)
	if err != nil {
		log.Error("encoding the outcome failed", "err", err)
		return false
	}
	if _, err := d.guarded.PutBlob(ctx, histKey, 0, data); err != nil && !errors.Is(err, adapters.ErrConflict) {
		log.Error("filing the outcome failed; will try again", "err", err)
		return false
	}
	if !d.clearKeys(ctx, clear, log) {
		return false
	}
	_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: machine, ID: ref.String(), What: what, Result: "ok"})
	return true
}

// clearKeys deletes keys in order; false (logged) when one could not be deleted.
func (d *Controller) clearKeys(ctx context.Context, keys []string, log *slog.Logger) bool {
	for _, key := range keys {
		if b, err := d.store.GetBlob(ctx, key); err == nil {
			if err := d.guarded.DeleteBlob(ctx, key, b.Version); err != nil {
				log.Error("clearing the finished request failed; will try again", "key", key, "err", err)
				return false
			}
		}
	}
	return true
}
