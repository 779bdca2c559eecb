package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/indoubt"
)

func (d *Controller) token() driver.Token { t, _ := d.lease.Valid(); return t }

func (d *Controller) draining() bool {
	select {
	case <-d.drain:
		return true
	default:
		return false
	}
}

// Run is the controller's life: stand by until it holds the lease, run every configured
// database's machines while it does, and stand by again after losing it. It returns nil
// once drained (Drain) and the lease released, or ctx's error when ctx ends first (a
// hard stop: commands in flight are cut off, each machine resumes from its snapshot under
// the next leader).
func (d *Controller) Run(ctx context.Context) error {
	for {
		actx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(ctx, cancel)
		go func() {
			select {
			case <-d.drain:
				cancel()
			case <-actx.Done():
			}
		}()
		d.log.Info("standing by for the lease", "holder", d.cfg.Controller.ID, "ttl", d.cfg.Controller.LeaseTTL.Or(driver.DefaultLeaseTTL))
		tok, err := d.lease.Acquire(actx)
		stop()
		cancel()
		if err != nil {
			if d.draining() {
				d.log.Info("stopped while standing by")
				return nil
			}
			return err
		}
		_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, What: "took the lease; resuming every machine from its snapshot", Result: "ok"})
		err = d.lead(ctx, tok)
		switch {
		case d.draining():
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = d.audit.Append(rctx, driver.AuditEntry{Event: driver.AuditAction, What: "drained: every started step finished and was saved; lease released", Result: "ok"})
			rerr := d.lease.Release(rctx)
			rcancel()
			return rerr
		case ctx.Err() != nil:
			return ctx.Err()
		}
		d.log.Error("lost the lease; standing by again", "err", err)
	}
}

// lead runs every database while the lease is held.
func (d *Controller) lead(ctx context.Context, tok driver.Token) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	held := make(chan error, 1)
	go func() {
		err := d.lease.Hold(lctx)
		cancel()
		held <- err
	}()
	var wg sync.WaitGroup
	for i := range d.cfg.Databases {
		db := &d.cfg.Databases[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.runDatabase(lctx, db)
		}()
	}
	wg.Wait()
	cancel()
	err := <-held
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// runDatabase runs one database's machines: ConfigPush fed by a watch of the record, and
// the in-doubt monitor. It returns when ctx ends or the drain finishes.
func (d *Controller) runDatabase(ctx context.Context, dc *DatabaseConfig) {
	ref := adapters.DBRef{Namespace: dc.Namespace, Database: dc.Name}
	log := d.log.With("db", ref.String())
	rec, err := d.watchUntilDrained(ctx, ref, 0)
	if err != nil {
		if ctx.Err() == nil && !d.draining() {
			log.Error("cannot read the record", "err", err)
		}
		return
	}
	var f *Fleet
	for {
		if f, err = d.open(ctx, dc); err == nil {
			break
		}
		log.Error("cannot reach the database's routers and shards; trying again", "err", err)
		if !sleep(ctx, 5*time.Second) || d.draining() {
			return
		}
	}
	defer f.Close()
	f.Learn(rec)
	// machines consume pushes and tracks; senders feed them and stop first, so the
	// channels are closed only when nobody can send any more.
	var machines, senders sync.WaitGroup
	pushes := make(chan configpush.Input, 4)
	tracks := make(chan indoubt.Input, 4)
	machines.Add(1)
	go func() {
		defer machines.Done()
		d.runConfigPush(ctx, dc, ref, f, pushes, log)
	}()
	senders.Add(2)
	go func() {
		defer senders.Done()
		d.runFailovers(ctx, dc, ref, f, pushes, log)
	}()
	go func() {
		defer senders.Done()
		d.runCutovers(ctx, dc, ref, f, log)
	}()
	monitor := dc.InDoubt.Enabled == nil || *dc.InDoubt.Enabled
	if monitor {
		machines.Add(1)
		go func() {
			defer machines.Done()
			d.runInDoubt(ctx, dc, ref, f, tracks, log)
		}()
	}
	d.watch(ctx, dc, ref, rec, f, pushes, tracks, monitor, log)
	senders.Wait()
	close(pushes)
	close(tracks)
	machines.Wait()
}

// watch turns every new version of the record into a Push (when routing may change and no
// cutover owns the routers) and a Track (when the shard set changes).
func (d *Controller) watch(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, rec *shardmap.Record, f *Fleet,
	pushes chan<- configpush.Input, tracks chan<- indoubt.Input, monitor bool, log *slog.Logger) {
	var shards []string
	for {
		f.Learn(rec)
		if rec.State.Phase == shardmap.CuttingOver {
			log.Debug("a cutover owns the routers; not pushing", "version", rec.Version, "gen", rec.Generation)
		} else if files, err := RenderFiles(rec, dc); err != nil {
			log.Error("cannot render the routers' files; not pushing this generation", "gen", rec.Generation, "err", err)
		} else {
			ids := dc.RouterIDs()
			select {
			case pushes <- configpush.Push{Record: rec, Generation: rec.Generation, Files: files, Instances: ids}:
			case <-ctx.Done():
				return
			case <-d.drain:
				return
			}
		}
		if names := shardNames(rec); monitor && !slices.Equal(names, shards) {
			shards = names
			select {
			case tracks <- indoubt.Track{Shards: names}:
			case <-ctx.Done():
				return
			case <-d.drain:
				return
			}
		}
		next, err := d.watchUntilDrained(ctx, ref, rec.Version)
		if err != nil {
			if ctx.Err() != nil || d.draining() {
				return
			}
			log.Warn("watching the record failed; trying again", "err", err)
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		rec = next
	}
}

// watchUntilDrained is the store's Watch, ended by a drain too.
func (d *Controller) watchUntilDrained(ctx context.Context, ref adapters.DBRef, after uint64) (*shardmap.Record, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.drain:
			cancel()
		case <-wctx.Done():
		}
	}()
	return d.store.Watch(wctx, ref, after)
}

// RouterIDs are the ids of the database's routers, in config order.
func (dc *DatabaseConfig) RouterIDs() []string {
	ids := make([]string, 0, len(dc.Routers))
	for _, r := range dc.Routers {
		ids = append(ids, r.ID)
	}
	return ids
}

// shardNames lists the shards the monitor scans: the layout's and, during a reshard, the
// target's (transactions can be prepared on either).
func shardNames(rec *shardmap.Record) []string {
	var names []string
	for _, s := range rec.Shards {
		names = append(names, s.Name)
	}
	if rec.Target != nil {
		for _, s := range rec.Target.Shards {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// keepRunning runs one machine's driver.Run again after an error (a store that was down, a
// snapshot save that conflicted) with backoff, until ctx ends or it is drained.
func (d *Controller) keepRunning(ctx context.Context, log *slog.Logger, name string, run func() error) {
	wait := time.Second
	for {
		err := run()
		switch {
		case err == nil:
			return
		case errors.Is(err, driver.ErrDrained):
			log.Info("drained", "machine", name)
			return
		case ctx.Err() != nil:
			return
		case errors.Is(err, driver.ErrNotLeader):
			log.Warn("stopped: the lease is not held", "machine", name)
			return
		}
		log.Error("machine stopped; starting it again from its snapshot", "machine", name, "err", err, "in", wait)
		if !sleep(ctx, wait) {
			return
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (d *Controller) runConfigPush(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, pushes <-chan configpush.Input, log *slog.Logger) {
	var mu sync.Mutex
	started := map[uint64]time.Time{}
	// Pushes pass through here so their start times are known for the duration metric.
	in := make(chan configpush.Input)
	go func() {
		defer close(in)
		for p := range pushes {
			if push, ok := p.(configpush.Push); ok {
				mu.Lock()
				if _, ok := started[push.Generation]; !ok {
					started[push.Generation] = time.Now()
				}
				mu.Unlock()
			}
			select {
			case in <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	opts := configpush.Options{AwaitFiles: f.FilesSeen != nil}
	if f.FilesSeen == nil && dc.Target.Kind != TargetFiles {
		// The target's files reach the routers late (the kubelet projects a ConfigMap a
		// minute or more after the write) and nothing tells when: a RELOAD that re-read the
		// old files fails its check (SHOW POOLS) and is retried, for as long as a wait for
		// the files would be (configpush's AwaitAttempts default, about 4.5 minutes).
		opts.MaxAttempts = lateFilesAttempts
	}
	exec := &driver.ConfigPushExecutor{
		Target:    d.target(dc, f),
		Instance:  driver.Lookup(f.Routers),
		FilesSeen: f.FilesSeen,
		Logger:    log,
		OnOutcome: func(o configpush.Outcome) {
			mu.Lock()
			t0, ok := started[o.Generation]
			delete(started, o.Generation)
			mu.Unlock()
			result := "ok"
			if o.Refused != "" || o.FilesErr != "" || len(o.Stuck) > 0 {
				result = "error"
			}
			if ok {
				d.m.pushDuration.WithLabelValues(ref.String(), result).Observe(time.Since(t0).Seconds())
			}
			for _, id := range o.Confirmed {
				d.m.routerGeneration.WithLabelValues(ref.String(), id).Set(float64(o.Generation))
			}
		},
	}
	audited := &driver.Audited[configpush.Input, configpush.Command]{Kind: "configpush", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		OnResult: func(c configpush.Command, r configpush.Input, e driver.AuditEntry) {
			d.m.step("configpush", e)
			if o, ok := r.(configpush.Observed); ok && o.Err == nil && o.Known {
				d.m.routerGeneration.WithLabelValues(ref.String(), o.Instance).Set(float64(o.Generation))
			}
		}}
	if freshStart { // a mutant build only: see mutant_fresh.go
		if b, err := d.store.GetBlob(ctx, driver.SnapshotKey("configpush", ref.String())); err == nil {
			_ = d.guarded.DeleteBlob(ctx, b.Key, b.Version)
		}
	}
	d.keepRunning(ctx, log, "configpush", func() error {
		return driver.Run(ctx, driver.ConfigPushRendered(audited, opts, d.rerender(ctx, dc, ref)), driver.Config[configpush.Input]{
			ID: ref.String(), Store: d.guarded, Logger: log, Inputs: in, Drain: d.drain,
		})
	})
}

// lateFilesAttempts bounds each step of a push whose files reach the routers late with no
// way to see them arrive: as many attempts as configpush gives a wait for the files.
const lateFilesAttempts = 30

// rerender renders the files of the database's record now (a restored push's files, which
// its snapshot does not keep).
func (d *Controller) rerender(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef) driver.Rerender {
	return func() (*shardmap.Record, render.Files, error) {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		files, err := RenderFiles(rec, dc)
		return rec, files, err
	}
}

// target is where a database's files go: the fleet's own target when its opener gave one,
// else files_dir, a directory laid out as a mounted ConfigMap.
func (d *Controller) target(dc *DatabaseConfig, f *Fleet) adapters.ConfigTarget {
	if f.Target != nil {
		return f.Target
	}
	if dc.Target.Kind != TargetFiles {
		return noFiles{fmt.Sprintf("databases %s: target kind %q has no ConfigTarget in this fleet: the opener (WithFleets) must set Fleet.Target", dc.Name, dc.Target.Kind)}
	}
	if dc.FilesDir == "" {
		return noFiles{"no files_dir configured for this database: set databases.files_dir to where the routers read their files"}
	}
	t, err := configmap.NewDir(dc.FilesDir)
	if err != nil {
		return noFiles{fmt.Sprintf("databases.files_dir %s: %v", dc.FilesDir, err)}
	}
	return t
}

// noFiles refuses to write, saying why.
type noFiles struct{ why string }

func (n noFiles) WriteFiles(context.Context, uint64, render.Files) error { return errors.New(n.why) }

func (d *Controller) runInDoubt(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *Fleet, tracks <-chan indoubt.Input, log *slog.Logger) {
	var roster adapters.Roster = f.Roster
	if roster == nil {
		var static staticRoster
		for _, r := range dc.Routers {
			if r.NodeID != "" {
				static = append(static, adapters.RouterProcess{ID: r.NodeID})
			}
		}
		roster = static
	}
	var mu sync.Mutex
	seen := map[string][]indoubt.Xact{}
	exec := &driver.InDoubtExecutor{Shard: f.shardLister(ctx), Roster: roster, Alerts: d.alerts, Logger: log}
	audited := &driver.Audited[indoubt.Input, indoubt.Command]{Kind: "indoubt", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		OnResult: func(c indoubt.Command, r indoubt.Input, e driver.AuditEntry) {
			d.m.step("indoubt", e)
			p, ok := r.(indoubt.Prepared)
			if !ok || p.Err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			seen[p.Shard] = p.Xacts
			n, oldest := 0, int64(0)
			for _, xs := range seen {
				for _, x := range xs {
					n++
					if x.Prepared > 0 && (oldest == 0 || x.Prepared < oldest) {
						oldest = x.Prepared
					}
				}
			}
			d.m.indoubtCount.WithLabelValues(ref.String()).Set(float64(n))
			age := 0.0
			if oldest > 0 {
				age = time.Since(time.UnixMilli(oldest)).Seconds()
			}
			d.m.indoubtOldest.WithLabelValues(ref.String()).Set(age)
		}}
	opts := indoubt.Options{Period: dc.InDoubt.Period.Duration, Threshold: dc.InDoubt.Threshold.Duration,
		StuckAfter: dc.InDoubt.StuckAfter.Duration, Deployment: dc.InDoubt.Deployment}
	d.keepRunning(ctx, log, "indoubt", func() error {
		return driver.Run(ctx, driver.InDoubt(audited, opts), driver.Config[indoubt.Input]{
			ID: ref.String(), Store: d.guarded, Logger: log, Inputs: tracks, Drain: d.drain,
		})
	})
}
