package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/cutover"
)

// Operators ask the controller for a cutover through the store: `cutover start` writes a
// request blob, `cutover finalize|rollback` a decision blob beside it. The active
// controller runs the request and, when the cutover is done, moves its outcome to the
// history and removes the request; a controller that takes over finds the request and the
// machine's snapshot and resumes.

// CutoverRequestKey is where `cutover start` (Requests.StartCutover) stores the request,
// CutoverDecisionKey the operator's decision, CutoverHistoryKey the filed outcome.
func CutoverRequestKey(ref adapters.DBRef) string  { return "request/cutover/" + ref.String() }
func CutoverDecisionKey(ref adapters.DBRef) string { return "request/cutover-decision/" + ref.String() }
func CutoverHistoryKey(ref adapters.DBRef, gen uint64) string {
	return fmt.Sprintf("history/cutover/%s/%020d", ref, gen)
}

// CutoverRequest is what `cutover start` stores.
type CutoverRequest struct {
	Plan cutover.Plan `json:"plan"`
	By   string       `json:"by"`
	At   int64        `json:"at"`
	// From is the generation the cutover starts from (the record's when requested).
	From uint64 `json:"from"`
	// Vitess, for a keyspace routed by Vitess, is the Reshard to run instead of Plan
	// (vreshard.go).
	Vitess *VitessPlan `json:"vitess,omitempty"`
}

// CutoverDecision is what `cutover finalize` and `cutover rollback` store.
type CutoverDecision struct {
	Decision string `json:"decision"` // finalize or reverse
	By       string `json:"by"`
	At       int64  `json:"at"`
}

// CutoverResult is a finished cutover, kept in the history.
type CutoverResult struct {
	Request    CutoverRequest `json:"request"`
	Outcome    string         `json:"outcome"`
	Generation uint64         `json:"generation"`
	Reason     string         `json:"reason,omitempty"`
	Missed     []string       `json:"missed,omitempty"`
	Lagging    []string       `json:"lagging,omitempty"`
	Unresumed  []string       `json:"unresumed,omitempty"`
	Ended      int64          `json:"ended"`
}

// GetJSON reads the JSON blob at key and its version; a blob that does not decode is
// adapters.ErrCorrupt.
func GetJSON[T any](ctx context.Context, s adapters.BlobStore, key string) (T, uint64, error) {
	var v T
	b, err := s.GetBlob(ctx, key)
	if err != nil {
		return v, 0, err
	}
	if err := json.Unmarshal(b.Data, &v); err != nil {
		return v, 0, fmt.Errorf("%s: %w: %v", key, adapters.ErrCorrupt, err)
	}
	return v, b.Version, nil
}

// runCutovers looks for a cutover request of the database and runs it, until ctx ends or
// the daemon drains.
func (d *Controller) runCutovers(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, log *slog.Logger) {
	pollRequests(ctx, d, CutoverRequestKey(ref), "cutover", log, func(req CutoverRequest) {
		d.runCutover(ctx, dc, ref, f, req, log.With("machine", "cutover"))
	})
}

// runCutover runs (or resumes) one requested cutover to its end, then files it in the
// history (requestrun.go).
func (d *Controller) runCutover(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, req CutoverRequest, log *slog.Logger) {
	if req.Vitess != nil {
		d.runVReshard(ctx, ref, f, req, log.With("machine", "vreshard"))
		return
	}
	snapKey := driver.SnapshotKey("cutover", ref.String())
	clear := []string{snapKey, CutoverDecisionKey(ref), CutoverRequestKey(ref)}
	fresh, run := d.fresh(ctx, "cutover", ref, CutoverHistoryKey(ref, req.From), req, clear, log)
	if !run {
		return
	}
	var start []cutover.Input
	if !fresh {
		// A cutover that ended before its filing is filed without running again.
		if s, _, err := GetJSON[cutover.Snapshot](ctx, d.store, snapKey); err == nil {
			if m, err := cutover.Restore(s); err == nil {
				if out, done := m.Done(); done {
					log.Info("the cutover had ended; filing it", "outcome", out)
					d.fileCutover(ctx, ref, req, cutover.Done{Outcome: out, Generation: m.Generation()}, clear, log)
					return
				}
			}
		}
	} else {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			log.Error("cannot read the record to start the cutover", "err", err)
			return
		}
		// A push of this generation still retrying could reload the designated instance
		// after its CUTOVER and undo the swap: start only once that push has ended.
		if !d.pushEnded(ctx, ref, rec.Generation, log) {
			return
		}
		start = []cutover.Input{cutover.Start{Record: rec, Plan: req.Plan}}
		_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "cutover", ID: ref.String(),
			What: fmt.Sprintf("cutover of %s requested by %s: generation %d, designated %s", ref, req.By, rec.Generation, req.Plan.Designated), Result: "ok"})
	}

	e := newEnding[cutover.Done]()
	exec := &driver.CutoverExecutor{
		DB: ref, Store: d.guarded, Target: d.target(dc, f),
		Render:    func(r *shardmap.Record) (render.Files, error) { return RenderFiles(r, dc) },
		Instance:  driver.Lookup(f.Routers),
		Resharder: driver.Lookup(f.Resharders),
		Backend:   f.backendLookup(ctx),
		Logger:    log,
		OnDone:    e.end,
	}
	var stepMu sync.Mutex
	stepStart := map[string]time.Time{}
	audited := &driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		Detail: cutoverDetail,
		OnResult: func(c cutover.Command, in cutover.Input, e driver.AuditEntry) {
			d.m.step("cutover", e)
			if r, ok := c.(cutover.Reload); ok && e.OK() {
				d.m.routerGeneration.WithLabelValues(ref.String(), r.Instance).Set(float64(r.Generation))
			}
			step := progressStep(parseStage(e.Step))
			if step == "" {
				return
			}
			stepMu.Lock()
			defer stepMu.Unlock()
			if _, ok := stepStart[step]; !ok {
				stepStart[step] = time.Now().Add(-time.Duration(e.DurationMS) * time.Millisecond)
				for s, t0 := range stepStart {
					if s != step && stepIndex(s) < stepIndex(step) {
						d.m.cutoverStepTime.WithLabelValues(ref.String(), s).Observe(time.Since(t0).Seconds())
						delete(stepStart, s)
					}
				}
			}
			d.m.cutoverAt(ref.String(), step)
		}}
	// The operator's decision is forwarded until the machine ends: before the point of no
	// return a finalize is ignored by it, so it must come again later.
	decision := func(ctx context.Context) (cutover.Input, bool) {
		dec, _, err := GetJSON[CutoverDecision](ctx, d.store, CutoverDecisionKey(ref))
		if err != nil {
			return nil, false
		}
		if dec.Decision == Reverse {
			return cutover.Reverse{}, true
		}
		return cutover.Finalize{}, true
	}
	if runToEnd(ctx, d, driver.Cutover(audited), ref.String(), log, start, e, decision) {
		d.m.cutoverAt(ref.String(), "")
		d.fileCutover(ctx, ref, req, e.done, clear, log)
	}
}

// pushEnded waits until ConfigPush has finished pushing generation gen (or a newer one), so
// that no reload of it is still in flight or due for a retry. It returns false if ctx ends
// or the daemon drains first.
func (d *Controller) pushEnded(ctx context.Context, ref adapters.DBRef, gen uint64, log *slog.Logger) bool {
	key := driver.SnapshotKey("configpush", ref.String())
	since := time.Now()
	for {
		s, _, err := GetJSON[configpush.Snapshot](ctx, d.store, key)
		if err == nil && s.Push != nil && (s.Push.Generation > gen || s.Push.Generation == gen && s.Push.Done) {
			return true
		}
		if time.Since(since) > 10*time.Second {
			log.Warn("the cutover waits for ConfigPush to finish pushing the record's generation", "gen", gen)
			since = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-d.drain:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fileCutover moves an ended cutover to the history and clears the request, so the next
// request starts a new machine.
func (d *Controller) fileCutover(ctx context.Context, ref adapters.DBRef, req CutoverRequest, done cutover.Done, clear []string, log *slog.Logger) {
	res := CutoverResult{Request: req, Outcome: done.Outcome.String(), Generation: done.Generation, Reason: done.Reason,
		Missed: done.Missed, Lagging: done.Lagging, Unresumed: done.Unresumed, Ended: time.Now().UnixMilli()}
	if d.file(ctx, "cutover", ref, CutoverHistoryKey(ref, req.From), res, clear,
		fmt.Sprintf("cutover ended: %s at generation %d%s", res.Outcome, res.Generation, prefixed(": ", res.Reason)), log) {
		log.Info("cutover ended", "outcome", res.Outcome, "generation", res.Generation, "reason", res.Reason)
	}
}

// cutoverDetail says what a reply carried, for the audit log and progress estimates.
func cutoverDetail(in cutover.Input) string {
	switch r := in.(type) {
	case cutover.CopyPolled:
		return fmt.Sprintf("lag=%d task=%s", r.LagBytes, r.Task.State)
	case cutover.CopyStarted:
		return fmt.Sprintf("task=%d", r.Task)
	case cutover.RecordWritten:
		if r.Conflict != nil {
			return fmt.Sprintf("conflict version=%d gen=%d", r.Conflict.Version, r.Conflict.Generation)
		}
		return fmt.Sprintf("version=%d", r.Version)
	case cutover.TasksListed:
		var parts []string
		for _, t := range r.Tasks {
			parts = append(parts, fmt.Sprintf("%d:%s", t.ID, t.State))
		}
		return "tasks=" + strings.Join(parts, ",")
	}
	return ""
}
