package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// PlanCheck is one precondition of a cutover.
type PlanCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
}

// PlanReport is `cutover plan`'s answer: every precondition, checked without changing
// anything.
type PlanReport struct {
	DB   string       `json:"db"`
	Plan cutover.Plan `json:"plan"`
	// Vitess is the plan of a Vitess keyspace's cutover (PlanVitessCutover) instead of Plan.
	Vitess *VitessPlan `json:"vitess,omitempty"`
	Checks []PlanCheck `json:"checks"`
	OK     bool        `json:"ok"`
}

func (r *PlanReport) add(name, status, format string, a ...any) {
	r.Checks = append(r.Checks, PlanCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, a...)})
}

// planCutover checks every precondition of a cutover of rec under plan, reading only.
// others are the other configured databases, whose running cutovers may share PgDog
// instances with this one.
func planCutover(ctx context.Context, st Store, ref adapters.DBRef, rec *shardmap.Record, plan cutover.Plan, dc *DatabaseConfig, others []DatabaseConfig, f *Fleet) *PlanReport {
	r := &PlanReport{DB: ref.String(), Plan: plan}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }

	// The record is ready: resharding towards a target, ConfigPush done with generation g.
	switch {
	case rec.Router.Kind != shardmap.PgDog:
		r.add("record", "fail", "%s is routed by %s: the fenced cutover is for PgDog databases; give the database a [databases.vitess] table (vtctld, vtgate) and its cutover is Vitess's Reshard (cutover plan --to <shards>)", ref, rec.Router.Kind)
	case rec.State.Phase != shardmap.Resharding || rec.Target == nil:
		r.add("record", "fail", "phase %s; a cutover starts from phase resharding with a target layout (map apply a record with state.phase resharding and target)", rec.State.Phase)
	case rec.State.To != rec.Generation+1:
		r.add("record", "fail", "state.to is %d; it must be generation+1 = %d", rec.State.To, rec.Generation+1)
	default:
		r.add("record", "ok", "version %d, generation %d resharding to %d: %d → %d shards", rec.Version, rec.Generation, rec.State.To, len(rec.Shards), len(rec.Target.Shards))
	}
	// The machine itself accepts the start (it checks the plan against the record).
	m := cutover.New()
	var seed [32]byte
	mctx := &machine.Ctx{Now: time.Now().UnixMilli(), Rand: rand.New(rand.NewChaCha8(seed)), Trace: machine.Discard}
	accepted := true
	for _, c := range m.On(mctx, cutover.Start{Record: rec, Plan: plan}) {
		if d, ok := c.(cutover.Done); ok && d.Outcome == cutover.Aborted {
			accepted = false
			r.add("start request", "fail", "the cutover would abort at once: %s", d.Reason)
		}
	}
	if accepted {
		r.add("start request", "ok", "the cutover machine accepts the plan")
	}
	// Each layout can be fenced on its own: the fence is the role's, and a role belongs to
	// the whole server, while the cutover opens the destination at the publish and keeps
	// the source fenced until finalize.
	if rec.Target != nil {
		shared := cutover.SharedServers(rec)
		for _, x := range shared {
			r.add("fence: "+x.Server, "fail", "source shard %s and destination shard %s are both on %s; the fence (ALTER ROLE %s NOLOGIN) holds for the whole server, and the cutover opens the destination when it publishes while the source stays fenced until finalize: put the destination shards on other servers",
				x.Source, x.Destination, x.Server, plan.Role)
		}
		if len(shared) == 0 {
			r.add("fence: separate servers", "ok", "no server holds both a source and a destination shard: each layout is fenced and opened on its own")
		}
	}
	if plan.Role != "" && plan.Role == dc.SchemaAdmin {
		r.add("fence: role", "fail", "the fenced role %s is also schema_admin, the login PgDog's COPY_DATA and its streams use: fencing it on both layouts would stop the copy and the stream back; give COPY_DATA a login of its own (schema_admin)", plan.Role)
	}
	planRequests(ctx, st, ref, r)
	// No other database's cutover runs on these PgDog instances: SHOW TASKS lists every
	// database's tasks on an instance together, and the cutover tells its copy and its
	// streams from others only by task id.
	shared := false
	for _, o := range others {
		if o.Namespace == dc.Namespace && o.Name == dc.Name {
			continue
		}
		oref := adapters.DBRef{Namespace: o.Namespace, Database: o.Name}
		for _, ours := range dc.Routers {
			if !slices.ContainsFunc(o.Routers, func(r RouterConfig) bool { return r.Admin == ours.Admin }) {
				continue
			}
			if _, err := st.GetBlob(ctx, CutoverRequestKey(oref)); err == nil {
				shared = true
				r.add("instances: "+ours.ID, "fail", "PgDog instance %s (%s) also serves %s, whose cutover is running: one cutover per PgDog instance at a time (its tasks are listed with ours); wait for `cutover status %s`", ours.ID, ours.Admin, oref, o.Name)
			}
		}
	}
	if !shared {
		r.add("instances: not shared", "ok", "no other database's cutover runs on these PgDog instances")
	}
	// Every instance answers, at the record's generation.
	for _, id := range plan.Instances {
		inst, ok := f.Routers[id]
		if !ok {
			r.add("instance "+id, "fail", "not among the database's routers in the config")
			continue
		}
		cctx, cancel := call()
		o, err := inst.Observe(cctx)
		cancel()
		switch {
		case err != nil && id == plan.Designated:
			r.add("instance "+id, "fail", "the designated instance does not answer: %v", err)
		case err != nil:
			r.add("instance "+id, "warn", "does not answer (%v): the cutover goes on without it and the fence keeps it off the source shards until it reloads", err)
		case o.GenerationKnown && o.Generation != rec.Generation:
			r.add("instance "+id, "fail", "routes by generation %d, not %d: wait for ConfigPush (the destination must be rendered everywhere)", o.Generation, rec.Generation)
		case o.GenerationKnown:
			r.add("instance "+id, "ok", "answers, at generation %d", o.Generation)
		default:
			r.add("instance "+id, "warn", "answers, generation unknown (PgDog does not report it)")
		}
	}
	// The designated instance can reshard, and is not busy.
	if rs, ok := f.Resharders[plan.Designated]; !ok {
		r.add("designated resharder", "fail", "%s has no resharding commands (COPY_DATA/CUTOVER)", plan.Designated)
	} else {
		cctx, cancel := call()
		tasks, err := rs.Tasks(cctx)
		cancel()
		active := 0
		for _, t := range tasks {
			if s := cutover.ClassifyTask(t.Status, t.InnerStatus); s != cutover.TaskFinished && s != cutover.TaskFailed && s != cutover.TaskNotListed {
				active++
			}
		}
		switch {
		case err != nil:
			r.add("designated resharder", "fail", "SHOW TASKS failed: %v", err)
		case active > 0:
			r.add("designated resharder", "warn", "%d task(s) active on %s; a copy of this database is adopted, others slow the copy", active, plan.Designated)
		default:
			r.add("designated resharder", "ok", "%s lists no active task", plan.Designated)
		}
	}
	// Source and target shards answer as primaries, writable; the sources are not fenced.
	for side, l := range map[string]*shardmap.Layout{"source": &rec.Layout, "target": rec.Target} {
		if l == nil {
			continue
		}
		for _, s := range l.Shards {
			name := side + " " + s.Name
			b, err := f.Backend(ctx, driver.BackendKey(s.Backend))
			if err != nil {
				r.add(name, "fail", "%v", err)
				continue
			}
			cctx, cancel := call()
			bs, err := b.Status(cctx)
			cancel()
			switch {
			case err != nil:
				r.add(name, "fail", "%s does not answer: %v", driver.BackendKey(s.Backend), err)
			case bs.Role != adapters.RolePrimary || bs.ReadOnly:
				r.add(name, "fail", "%s is %s, read-only %v: a cutover needs a writable primary", driver.BackendKey(s.Backend), bs.Role, bs.ReadOnly)
			case side == "source" && s.Fence != shardmap.FenceOpen:
				r.add(name, "fail", "the record has it fenced already")
			default:
				r.add(name, "ok", "%s primary at %s", driver.BackendKey(s.Backend), bs.Position)
			}
			if side == "source" && err == nil {
				cctx, cancel := call()
				xs, perr := b.Prepared(cctx)
				cancel()
				if perr == nil && len(xs) > 0 {
					r.add(name+" prepared", "warn", "%d prepared transaction(s): the fence leaves them in doubt until resolved", len(xs))
				}
			}
		}
	}
	// Rollback would work: d can be put back on generation g's files, the files can be
	// written, and the sources can be unfenced (reached with the controller's login, above).
	if files, err := RenderFiles(rec, dc); err != nil {
		r.add("rollback: files of g", "fail", "generation %d does not render, so d could not be reloaded from it: %v", rec.Generation, err)
	} else if _, ok := files.Get(render.PgDogConfigFile); !ok {
		r.add("rollback: files of g", "fail", "generation %d renders no %s", rec.Generation, render.PgDogConfigFile)
	} else {
		r.add("rollback: files of g", "ok", "generation %d renders (%s)", rec.Generation, strings.Join(files.Names(), ", "))
	}
	switch {
	case f.Target != nil:
		r.add("rollback: files target", "ok", "the fleet's own ConfigTarget takes the files of g+1 (and back)")
	case dc.FilesDir == "":
		r.add("rollback: files_dir", "fail", "no files_dir: the files of g+1 (and back) have nowhere to go")
	default:
		if err := writable(dc.FilesDir); err != nil {
			r.add("rollback: files_dir", "fail", "%v", err)
		} else {
			r.add("rollback: files_dir", "ok", "%s is writable", dc.FilesDir)
		}
	}
	if _, ok := f.Routers[plan.Designated]; ok {
		r.add("rollback: reload d", "ok", "%s is reachable to be reloaded from generation %d's files", plan.Designated, rec.Generation)
	}
	return r.done()
}

// planRequests checks that no cutover of ref is requested already and that a controller
// will run the request.
func planRequests(ctx context.Context, st Store, ref adapters.DBRef, r *PlanReport) {
	// Nothing else is cutting this database over.
	if _, err := st.GetBlob(ctx, CutoverRequestKey(ref)); err == nil {
		r.add("no cutover running", "fail", "a cutover of %s is already requested (see `cutover status`)", ref)
	} else if !errors.Is(err, adapters.ErrNotFound) {
		r.add("no cutover running", "fail", "cannot read the requests: %v", err)
	} else {
		r.add("no cutover running", "ok", "none requested")
	}
	// A controller will run it.
	if b, err := st.GetBlob(ctx, driver.DefaultLeaseKey); err == nil {
		var l struct {
			Holder   string `json:"holder"`
			Released bool   `json:"released"`
		}
		_ = json.Unmarshal(b.Data, &l)
		if l.Released {
			r.add("controller", "warn", "the last controller (%s) released the lease; the request waits until one runs", l.Holder)
		} else {
			r.add("controller", "ok", "held by %s", l.Holder)
		}
	} else {
		r.add("controller", "warn", "no controller has run on this store yet; the request waits for `loamrouter serve`")
	}
}

// writable checks a directory can take a new file, leaving nothing behind.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".loam-plan-*")
	if err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
