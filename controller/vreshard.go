package controller

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/vreshard"
)

// A cutover of a keyspace routed by Vitess is Vitess's own Reshard, driven by
// machine/vreshard: create the workflow, wait for the copy and the lag, VDiff, switch the
// reads then the writes, check through vtgate, complete — or cancel / reverse on the way —
// with the record mirroring the serving partition after every step. It is asked for, run,
// decided on and filed like the fenced cutover (the same request, decision and history
// keys), so `cutover plan|start|status|rollback` work on either kind of database.

// VitessPlan is a Vitess keyspace's cutover: Reshard Source into Target with workflow
// Workflow, the record mirroring cell Cell's serving graph. Backends names each target
// shard's primary as the record will (its MySQL server and tablet, read from vtctld by the
// plan).
type VitessPlan struct {
	Keyspace string                      `json:"keyspace"`
	Workflow string                      `json:"workflow"`
	Cell     string                      `json:"cell"`
	Source   []string                    `json:"source"`
	Target   []string                    `json:"target"`
	Backends map[string]shardmap.Backend `json:"backends"`
	// MaxLagMs and PollEveryMs tune the machine (0: its defaults).
	MaxLagMs    int64 `json:"max_lag_ms,omitempty"`
	PollEveryMs int64 `json:"poll_every_ms,omitempty"`
	// FinalizeAfterMs completes on its own that long after the hold began (0: wait for
	// `cutover finalize`).
	FinalizeAfterMs int64 `json:"finalize_after_ms,omitempty"`
}

func (p VitessPlan) start(rec *shardmap.Record) vreshard.Start {
	return vreshard.Start{Record: rec, Workflow: p.Workflow, Cell: p.Cell, Source: slices.Clone(p.Source), Target: slices.Clone(p.Target),
		Backends: p.Backends, Options: vreshard.Options{MaxLagMs: p.MaxLagMs, PollEvery: p.PollEveryMs, FinalizeAfter: p.FinalizeAfterMs}}
}

// PlanVitessCutover checks every precondition of a Reshard of ref's keyspace into the shards
// to (Vitess shard names, e.g. -80 and 80-), reading only: the record serves the source
// shards, the machine accepts the start, vtctld names a primary for every target shard, the
// machine's pre-flight (shards exist and serve, binlog ROW with a full image and GTIDs on
// every source, the target ranges partition the source ranges, the VSchema's primary vindex
// covers every table), vtgate answers for the check after the switch, and no cutover of ref
// is running. workflow "" names it loam_g<generation>.
func PlanVitessCutover(ctx context.Context, st Store, cfg *Config, ref adapters.DBRef, to []string, workflow string, open Opener) (*PlanReport, error) {
	dc, ok := cfg.Database(ref)
	if !ok {
		return nil, fmt.Errorf("%s: %w in %s: a cutover needs its vtctld", ref, ErrNotConfigured, cfg.path)
	}
	if dc.Vitess == nil {
		return nil, fmt.Errorf("%s has no [databases.vitess] table in %s: a Vitess cutover needs vtctld (vitess.vtctld) and vtgate (vitess.vtgate)", ref, cfg.path)
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
	return planVitess(ctx, st, ref, rec, dc, to, workflow, f), nil
}

func planVitess(ctx context.Context, st Store, ref adapters.DBRef, rec *shardmap.Record, dc *DatabaseConfig, to []string, workflow string, f *Fleet) *PlanReport {
	if workflow == "" {
		workflow = fmt.Sprintf("loam_g%d", rec.Generation)
	}
	p := &VitessPlan{Keyspace: rec.Router.Name, Workflow: workflow, Cell: dc.Vitess.cell(), Target: slices.Clone(to),
		Backends: map[string]shardmap.Backend{}, MaxLagMs: dc.Vitess.MaxLag.Milliseconds(), PollEveryMs: dc.Vitess.PollEvery.Milliseconds(),
		FinalizeAfterMs: dc.Vitess.FinalizeAfter.Milliseconds()}
	for _, s := range rec.Layout.Shards {
		p.Source = append(p.Source, s.Name)
	}
	r := &PlanReport{DB: ref.String(), Vitess: p}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 30*time.Second) }

	switch {
	case rec.Router.Kind != shardmap.Vitess:
		r.add("record", "fail", "%s is routed by %s: its cutover is the fenced one (remove [databases.vitess] from its config)", ref, rec.Router.Kind)
	case rec.State.Phase != shardmap.Serving:
		r.add("record", "fail", "phase %s: a Vitess reshard starts from a serving record (finish or cancel what runs first)", rec.State.Phase)
	case len(to) == 0:
		r.add("record", "fail", "name the target shards (--to -80,80-)")
	default:
		r.add("record", "ok", "version %d, generation %d: keyspace %s serves %s; reshard into %s with workflow %s in cell %s",
			rec.Version, rec.Generation, p.Keyspace, strings.Join(p.Source, ","), strings.Join(to, ","), workflow, p.Cell)
	}
	if f.Workflows == nil {
		r.add("vtctld", "fail", "the fleet has no vtctld workflow API (set [databases.vitess] vtctld)")
		return r.done()
	}
	// Each target shard's primary, as the record will name it.
	for _, n := range to {
		cctx, cancel := call()
		sh, err := f.Workflows.Shard(cctx, p.Keyspace, n)
		var tb adapters.TabletInfo
		if err == nil && sh.Primary != "" {
			tb, err = f.Workflows.Tablet(cctx, sh.Primary)
		}
		cancel()
		switch {
		case err != nil:
			r.add("target "+n, "fail", "vtctld: %v", err)
		case sh.Primary == "":
			r.add("target "+n, "fail", "shard %s/%s has no primary tablet: start its tablets and elect one (PlannedReparentShard)", p.Keyspace, n)
		case tb.MySQLHost == "" || tb.MySQLPort == 0:
			r.add("target "+n, "fail", "tablet %s does not say where its MySQL listens (mysql_hostname, mysql_port)", sh.Primary)
		default:
			p.Backends[n] = shardmap.Backend{Host: tb.MySQLHost, Port: uint16(tb.MySQLPort), Database: tb.DBName, Tablet: tb.Alias}
			r.add("target "+n, "ok", "primary %s, MySQL %s:%d/%s", tb.Alias, tb.MySQLHost, tb.MySQLPort, tb.DBName)
		}
	}
	// The machine accepts the start.
	m := vreshard.New()
	var seed [32]byte
	mctx := &machine.Ctx{Now: time.Now().UnixMilli(), Rand: rand.New(rand.NewChaCha8(seed)), Trace: machine.Discard}
	var inspect *vreshard.Inspect
	for _, c := range m.On(mctx, p.start(rec)) {
		switch c := c.(type) {
		case vreshard.Done:
			r.add("start request", "fail", "the reshard would end at once: %s", c.Reason)
		case vreshard.Inspect:
			inspect = &c
		}
	}
	// The machine's own pre-flight, on the facts it would read.
	if inspect != nil {
		r.add("start request", "ok", "the reshard machine accepts the plan")
		exec := &driver.VReshardExecutor{DB: ref, Workflows: f.Workflows, Control: f.Vitess}
		cctx, cancel := call()
		in, _ := exec.Execute(cctx, *inspect)
		cancel()
		facts := in.(vreshard.Inspected)
		if facts.Err != nil {
			r.add("pre-flight", "fail", "reading the keyspace's facts failed: %v", facts.Err)
		} else if problems := vreshard.Check(p.Source, p.Target, facts.Facts); len(problems) > 0 {
			for _, pr := range problems {
				r.add("pre-flight", "fail", "%s", pr)
			}
		} else {
			r.add("pre-flight", "ok", "shards exist and serve, binlogs ROW/FULL with GTIDs on %d source(s), targets partition the sources, %d table(s) under a primary vindex",
				len(facts.Facts.Sources), len(facts.Facts.Tables))
		}
	}
	// vtgate answers: the check after the switch reads every target shard through it.
	if f.Vtgate == nil {
		r.add("vtgate", "fail", "no vtgate to check the target shards through after the switch: set [databases.vitess] vtgate, vtgate_user and vtgate_password_env")
	} else {
		cctx, cancel := call()
		var one int
		err := f.Vtgate.QueryRowContext(cctx, "SELECT 1").Scan(&one)
		cancel()
		if err != nil {
			r.add("vtgate", "fail", "%s does not answer: %v", dc.Vitess.Vtgate, err)
		} else {
			r.add("vtgate", "ok", "%s answers", dc.Vitess.Vtgate)
		}
	}
	planRequests(ctx, st, ref, r)
	return r.done()
}

// done sets OK from the checks.
func (r *PlanReport) done() *PlanReport {
	r.OK = true
	for _, c := range r.Checks {
		if c.Status == "fail" {
			r.OK = false
		}
	}
	return r
}

// StartVitessCutover asks for the Vitess cutover p of ref (checked first by
// PlanVitessCutover), from the record's generation now. An already requested cutover is
// adapters.ErrConflict.
func (r Requests) StartVitessCutover(ctx context.Context, ref adapters.DBRef, p VitessPlan) (CutoverRequest, error) {
	return r.startCutover(ctx, ref, CutoverRequest{Vitess: &p},
		fmt.Sprintf("Vitess cutover start requested: reshard %s into %s (workflow %s)", strings.Join(p.Source, ","), strings.Join(p.Target, ","), p.Workflow))
}

// runVReshard runs (or resumes) a requested Vitess cutover to its end, then files it in the
// history. The operator's rollback is the machine's CancelRequest (a cancel before the
// writes switched, a reverse after, the hold included); a finalize is its Finalize, which
// ends the hold after the check through vtgate passed (Complete). A finalize is forwarded
// every poll, as the fenced cutover's is: the machine ignores it before the hold.
func (d *Controller) runVReshard(ctx context.Context, ref adapters.DBRef, f *Fleet, req CutoverRequest, log *slog.Logger) {
	const kind = "vreshard"
	histKey := CutoverHistoryKey(ref, req.From)
	clear := []string{driver.SnapshotKey(kind, ref.String()), CutoverDecisionKey(ref), CutoverRequestKey(ref)}
	if f.Workflows == nil {
		log.Error("the database's fleet has no vtctld; the Vitess cutover waits (set [databases.vitess] vtctld)")
		return
	}
	fresh, run := d.fresh(ctx, kind, ref, histKey, req, clear, log)
	if !run {
		return
	}
	var start []vreshard.Input
	if fresh {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			log.Error("cannot read the record to start the reshard", "err", err)
			return
		}
		start = []vreshard.Input{req.Vitess.start(rec)}
		_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: kind, ID: ref.String(),
			What: fmt.Sprintf("Vitess cutover of %s requested by %s: generation %d, %s into %s", ref, req.By, rec.Generation,
				strings.Join(req.Vitess.Source, ","), strings.Join(req.Vitess.Target, ",")), Result: "ok"})
	}
	e := newEnding[vreshard.Done]()
	check := driver.VtgateCheck{DB: f.Vtgate, Record: func(ctx context.Context) (*shardmap.Record, error) { return d.store.Read(ctx, ref) }}
	exec := &driver.VReshardExecutor{DB: ref, Store: d.guarded, Workflows: f.Workflows, Control: f.Vitess, Logger: log, OnDone: e.end}
	if f.Vtgate != nil {
		exec.Verify = check.Verify
	}
	audited := &driver.Audited[vreshard.Input, vreshard.Command]{Kind: kind, ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		Detail:   vreshardDetail,
		OnResult: func(c vreshard.Command, in vreshard.Input, en driver.AuditEntry) { d.m.step(kind, en) }}
	var noted uint64 // the decision blob's version last logged (a rollback: forwarded)
	next := func(ctx context.Context) (vreshard.Input, bool) {
		dec, version, err := GetJSON[CutoverDecision](ctx, d.store, CutoverDecisionKey(ref))
		if err != nil {
			return nil, false
		}
		fresh := version != noted
		noted = version
		if dec.Decision == Reverse {
			if !fresh {
				return nil, false
			}
			log.Info("rollback asked: the reshard cancels (before the writes switched) or reverses the traffic", "by", dec.By)
			return vreshard.CancelRequest{}, true
		}
		if fresh {
			log.Info("finalize asked: the reshard completes once the writes are switched and vtgate's check passed", "by", dec.By)
		}
		return vreshard.Finalize{}, true
	}
	if !runToEnd(ctx, d, driver.VReshard(audited), ref.String(), log, start, e, next) {
		return
	}
	done := e.done
	res := CutoverResult{Request: req, Outcome: done.Outcome.String(), Generation: done.Generation, Reason: done.Reason, Ended: time.Now().UnixMilli()}
	if d.file(ctx, kind, ref, histKey, res, clear, fmt.Sprintf("cutover ended: %s at generation %d%s", res.Outcome, res.Generation, prefixed(": ", res.Reason)), log) {
		log.Info("Vitess cutover ended", "outcome", res.Outcome, "generation", res.Generation, "reason", res.Reason)
	}
}

// vreshardDetail says what a reply carried, for the audit log and `cutover status`.
func vreshardDetail(in vreshard.Input) string {
	switch r := in.(type) {
	case vreshard.Progress:
		return fmt.Sprintf("copying=%v lag_ms=%d", r.Copying, r.LagMs)
	case vreshard.Diffed:
		return fmt.Sprintf("done=%v mismatch=%s rows=%d", r.Done, strings.Join(r.Mismatch, ","), r.Rows)
	case vreshard.RecordWritten:
		if r.Conflict != nil {
			return fmt.Sprintf("conflict version=%d gen=%d", r.Conflict.Version, r.Conflict.Generation)
		}
		return fmt.Sprintf("version=%d", r.Version)
	case vreshard.Serving:
		var names []string
		for _, s := range r.Primary {
			names = append(names, s.Name)
		}
		return "primary=" + strings.Join(names, ",")
	}
	return ""
}

// The steps of a Vitess cutover as `cutover status` shows them, and the machine's stages
// (the last part of its step ids, "<keyspace>/<workflow>/<stage>") in each; a mirror
// belongs to the step it follows.
var vreshardSteps = []string{"inspect", "create", "copy", "vdiff", "reads", "writes", "verify", "hold", "complete"}

var vreshardStage = map[string]string{
	"inspect": "inspect", "mirror>create": "inspect",
	"create": "create", "mirror>copy": "create",
	"copy": "copy", "vdiff": "vdiff",
	"reads": "reads", "mirror>writes": "reads",
	"writes": "writes", "mirror>verify": "writes",
	"verify":   "verify",
	"complete": "complete", "mirror>done:completed": "complete",
}

// vreshardStep maps a step id to its step, or says it turns back: cancels (the writes not
// switched) or reverses.
func vreshardStep(step string) (name string, rollback, reverse bool) {
	step, _, _ = strings.Cut(step, "@")
	parts := strings.SplitN(step, "/", 3)
	if len(parts) < 3 {
		return "", false, false
	}
	switch st := parts[2]; st {
	case "cancel", "unswitch-reads", "mirror>done:cancelled":
		return "", true, false
	case "reverse", "mirror>done:reversed":
		return "", false, true
	default:
		return vreshardStage[st], false, false
	}
}

// vreshardProgress is `cutover status` of a Vitess cutover, from its audit entries.
func vreshardProgress(db string, entries []driver.AuditEntry, now time.Time) CutoverProgress {
	p := progressFrom(db, entries, 0, now, vreshardSteps, vreshardStep)
	// The hold sends nothing, so no entry names it: it is where the machine is once the
	// last step entry is vtgate's check answered ok, and done once Complete went out.
	hold := slices.Index(vreshardSteps, "hold")
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Step == "" || e.Event != driver.AuditExec && e.Event != driver.AuditResult {
			continue
		}
		name, rollback, reverse := vreshardStep(e.Step)
		switch {
		case name == "verify" && e.Event == driver.AuditResult && e.OK() && p.Outcome == "" && !rollback && !reverse:
			p.Steps[hold-1].State, p.Steps[hold-1].EndMS = "done", e.At
			p.Steps[hold].State, p.Steps[hold].StartMS = "running", e.At
			p.Current = "hold"
		case name == "complete":
			h := &p.Steps[hold]
			h.State, h.StartMS, h.EndMS = "done", p.Steps[hold-1].EndMS, p.Steps[hold+1].StartMS
		}
		if name != "" || rollback || reverse {
			break
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if lag, ok := detailInt(entries[i].Detail, "lag_ms"); ok {
			p.LagMS = lag
			break
		}
	}
	p.Vitess = true
	return p
}
