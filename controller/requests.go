package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// Requests is how an operator asks the active controller for a cutover or a failover and
// decides one: it writes a request or decision blob into the store the controller reads
// (from any process: the CLI, an embedding control plane, the controller's own methods),
// and notes it in the audit log signed by By. The active controller runs the request and
// files its outcome in the history; a controller that takes over finds the request and
// resumes it.
type Requests struct {
	Store Store
	// By names who asks, in the request and the audit log.
	By  string
	Log *slog.Logger
}

// ErrNoShard: a failover names a shard the record does not have.
var ErrNoShard = errors.New("no such shard in the record")

func (r Requests) audit(ctx context.Context, e driver.AuditEntry) {
	by := r.By
	_ = driver.NewAudit(r.Store, func() driver.Token { return driver.Token{Holder: by} }, r.Log).Append(ctx, e)
}

// StartCutover asks for a cutover of ref under plan, from the record's generation now.
// An already requested cutover is adapters.ErrConflict. Check the plan first (PlanCutover):
// the controller runs what it is given. A keyspace routed by Vitess is cut over with
// StartVitessCutover instead.
func (r Requests) StartCutover(ctx context.Context, ref adapters.DBRef, plan cutover.Plan) (CutoverRequest, error) {
	return r.startCutover(ctx, ref, CutoverRequest{Plan: plan}, "cutover start requested: designated "+plan.Designated)
}

// startCutover stores req, from the record's generation now, and notes what in the audit log.
func (r Requests) startCutover(ctx context.Context, ref adapters.DBRef, req CutoverRequest, what string) (CutoverRequest, error) {
	rec, err := r.Store.Read(ctx, ref)
	if err != nil {
		return CutoverRequest{}, fmt.Errorf("%s: %w", ref, err)
	}
	req.By, req.At, req.From = r.By, time.Now().UnixMilli(), rec.Generation
	if err := PutJSON(ctx, r.Store, CutoverRequestKey(ref), 0, req); err != nil {
		return CutoverRequest{}, err
	}
	machine := "cutover"
	if req.Vitess != nil {
		machine = "vreshard"
	}
	r.audit(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: machine, ID: ref.String(),
		What: fmt.Sprintf("%s, from generation %d", what, rec.Generation), Result: "ok"})
	return req, nil
}

// Decisions of a running cutover.
const (
	Finalize = "finalize" // keep the new layout
	Reverse  = "reverse"  // go back to the source layout
)

// ErrNoCutover: a decision for a database with no cutover requested.
var ErrNoCutover = errors.New("no cutover is running")

// DecideCutover finalizes or reverses (rolls back) ref's running cutover. The controller
// acts on it once every instance has resumed; a later decision replaces an earlier one.
func (r Requests) DecideCutover(ctx context.Context, ref adapters.DBRef, decision string) error {
	if decision != Finalize && decision != Reverse {
		return fmt.Errorf("decision %q: use %q or %q", decision, Finalize, Reverse)
	}
	if _, err := r.Store.GetBlob(ctx, CutoverRequestKey(ref)); err != nil {
		return fmt.Errorf("%w for %s (%w)", ErrNoCutover, ref, err)
	}
	d := CutoverDecision{Decision: decision, By: r.By, At: time.Now().UnixMilli()}
	var expect uint64
	if b, err := r.Store.GetBlob(ctx, CutoverDecisionKey(ref)); err == nil {
		expect = b.Version
	}
	if err := PutJSON(ctx, r.Store, CutoverDecisionKey(ref), expect, d); err != nil {
		return err
	}
	r.audit(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "cutover", ID: ref.String(), What: "cutover " + decision + " requested", Result: "ok"})
	return nil
}

// Failover asks for shard of ref to be repointed to promoted (its database defaults to
// the shard's). A failover already running is adapters.ErrConflict; a shard the record
// lacks is ErrNoShard.
func (r Requests) Failover(ctx context.Context, ref adapters.DBRef, shard string, promoted shardmap.Backend) (FailoverRequest, error) {
	rec, err := r.Store.Read(ctx, ref)
	if err != nil {
		return FailoverRequest{}, fmt.Errorf("%s: %w", ref, err)
	}
	var cur *shardmap.Shard
	for _, l := range Layouts(rec) {
		for i := range l.Shards {
			if l.Shards[i].Name == shard {
				cur = &l.Shards[i]
			}
		}
	}
	if cur == nil {
		return FailoverRequest{}, fmt.Errorf("%s has no shard %q: %w", ref, shard, ErrNoShard)
	}
	if promoted.Database == "" {
		promoted.Database = cur.Backend.Database
	}
	req := FailoverRequest{Shard: shard, Promoted: promoted, By: r.By, At: time.Now().UnixMilli()}
	if err := PutJSON(ctx, r.Store, FailoverRequestKey(ref), 0, req); err != nil {
		return FailoverRequest{}, err
	}
	r.audit(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "failover", ID: ref.String(),
		What: fmt.Sprintf("failover requested: %s %s → %s", shard, driver.BackendKey(cur.Backend), driver.BackendKey(promoted)), Result: "ok"})
	return req, nil
}

// FailoverOutcome is req's filed outcome: adapters.ErrNotFound until the controller has
// run it to its end.
func (r Requests) FailoverOutcome(ctx context.Context, ref adapters.DBRef, req FailoverRequest) (FailoverResult, error) {
	res, _, err := GetJSON[FailoverResult](ctx, r.Store, FailoverHistoryKey(ref, req.At))
	return res, err
}

// CutoverStatus finds ref's running cutover (or the last one) and reads its progress
// from the audit log, with the entries it was read from.
func CutoverStatus(ctx context.Context, st Store, ref adapters.DBRef) (CutoverProgress, []driver.AuditEntry, error) {
	req, _, err := GetJSON[CutoverRequest](ctx, st, CutoverRequestKey(ref))
	var res *CutoverResult
	if errors.Is(err, adapters.ErrNotFound) {
		hist, herr := st.ListBlobs(ctx, "history/cutover/"+ref.String()+"/")
		if herr != nil {
			return CutoverProgress{}, nil, herr
		}
		if len(hist) == 0 {
			return CutoverProgress{DB: ref.String(), LagBytes: -1}, nil, nil
		}
		r, _, herr := GetJSON[CutoverResult](ctx, st, hist[len(hist)-1].Key)
		if herr != nil {
			return CutoverProgress{}, nil, herr
		}
		res, req = &r, r.Request
	} else if err != nil {
		return CutoverProgress{}, nil, err
	}
	machine := "cutover"
	if req.Vitess != nil {
		machine = "vreshard"
	}
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{Machine: machine, ID: ref.String(), Since: time.UnixMilli(req.At - 1)})
	if err != nil {
		return CutoverProgress{}, nil, err
	}
	if req.Vitess != nil {
		p := vreshardProgress(ref.String(), entries, time.Now())
		p.From = req.From
		if res != nil {
			p.Outcome, p.Running = res.Outcome, false
		}
		return p, entries, nil
	}
	threshold := req.Plan.Options.LagThreshold
	if threshold <= 0 {
		threshold = 1_000_000
	}
	p := ProgressFromAudit(ref.String(), entries, threshold, time.Now())
	p.From = req.From
	if res != nil {
		p.Outcome, p.Running = res.Outcome, false
	}
	return p, entries, nil
}

// CutoverPlan is the database's default plan, from [databases.cutover]: the designated
// instance, every router, the app role fenced, the publication (default <db>_pub) and the
// machine's options.
func (dc *DatabaseConfig) CutoverPlan() cutover.Plan {
	p := cutover.Plan{Designated: dc.Cutover.Designated, Instances: dc.RouterIDs(), Role: dc.AppUser, Publication: dc.Cutover.Publication}
	p.Options.LagThreshold, p.Options.Grace = dc.Cutover.LagThreshold, dc.Cutover.Grace.Milliseconds()
	p.Options.PollEvery, p.Options.FinalizeAfter = dc.Cutover.PollEvery.Milliseconds(), dc.Cutover.FinalizeAfter.Milliseconds()
	p.Options.RetryAfter, p.Options.Attempts = dc.Cutover.RetryAfter.Milliseconds(), dc.Cutover.Attempts
	p.Options.InstanceAttempts = dc.Cutover.InstanceAttempts
	p.Options.ReverseSettle = cmp.Or(dc.Cutover.ReverseSettle, Duration{DefaultReverseSettle}).Milliseconds()
	if p.Publication == "" {
		p.Publication = strings.ToLower(dc.Name) + "_pub"
	}
	return p
}

// ErrNotConfigured: a database with no [[databases]] table.
var ErrNotConfigured = errors.New("no [[databases]] table")

// PlanCutover checks every precondition of a cutover of ref under plan, reading only:
// it reads the record, opens the database's fleet with open and asks its routers and
// shards. The report says what holds (OK) and what does not.
func PlanCutover(ctx context.Context, st Store, cfg *Config, ref adapters.DBRef, plan cutover.Plan, open Opener) (*PlanReport, error) {
	dc, ok := cfg.Database(ref)
	if !ok {
		return nil, fmt.Errorf("%s: %w in %s: a cutover needs its routers and logins", ref, ErrNotConfigured, cfg.path)
	}
	rec, err := st.Read(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if open == nil {
		open = OpenFleet
	}
	f, err := open(ctx, dc)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	f.Learn(rec)
	return planCutover(ctx, st, ref, rec, plan, dc, cfg.Databases, f), nil
}

// PlanCutover is PlanCutover on this controller's store and fleets.
func (d *Controller) PlanCutover(ctx context.Context, ref adapters.DBRef, plan cutover.Plan) (*PlanReport, error) {
	return PlanCutover(ctx, d.store, d.cfg, ref, plan, d.open)
}

// PutJSON stores v as JSON at key by compare-and-set (expect 0: create), as requests are
// stored.
func PutJSON(ctx context.Context, st adapters.BlobStore, key string, expect uint64, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = st.PutBlob(ctx, key, expect, data)
	return err
}
