package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// ErrUnknownBackend is returned for a Fence or Unfence naming a shard backend the executor
// cannot find.
var ErrUnknownBackend = errors.New("driver: unknown shard backend")

// ErrCannotDrain is returned for a Cutover whose Drain names a shard backend that is not an
// adapters.SlotDrainer: CUTOVER is then not sent.
var ErrCannotDrain = errors.New("driver: shard backend cannot wait for a replication slot to drain")

// ErrNoResharder is returned for a resharding command sent to an instance that has no
// PgDog admin connection able to reshard.
var ErrNoResharder = errors.New("driver: instance cannot reshard")

// CutoverExecutor executes cutover commands: WriteRecord on the Store, WriteFiles on the
// Target, Pause, Resume and Reload on router instances, Fence and Unfence on shard
// backends, and the resharding commands on the designated instance's Resharder. A
// Cutover's drain runs on the shard backends (each must be an adapters.SlotDrainer) before
// its CUTOVER.
type CutoverExecutor struct {
	DB     adapters.DBRef
	Store  adapters.ShardMapStore
	Target adapters.ConfigTarget
	// Render renders a record into the routers' files: kernel/render.PgDog with the
	// deployment's credentials and options.
	Render func(*shardmap.Record) (render.Files, error)
	// Instance finds a router instance by id (see Lookup).
	Instance func(id string) (adapters.RouterInstance, bool)
	// Resharder finds the PgDog admin connection of an instance by id.
	Resharder func(id string) (adapters.Resharder, bool)
	// Backend finds the server of a shard by its host, port and database (see BackendKey).
	Backend func(key string) (adapters.ShardBackend, bool)
	// OnDone, when set, receives the cutover's end (it is logged either way).
	OnDone func(cutover.Done)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// BackendKey is how CutoverExecutor.Backend names a shard's server: "host:port/database".
func BackendKey(b shardmap.Backend) string {
	return b.Host + ":" + strconv.Itoa(int(b.Port)) + "/" + b.Database
}

// Execute performs one command; see cutover.Command for what each must do.
func (e *CutoverExecutor) Execute(ctx context.Context, cmd cutover.Command) (cutover.Input, bool) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	switch c := cmd.(type) {
	case cutover.WriteRecord:
		v, err := e.Store.CAS(ctx, e.DB, c.Expect, c.Record)
		var conflict *adapters.ConflictError
		if errors.As(err, &conflict) {
			return cutover.RecordWritten{Step: c.Step, Conflict: conflict.Current, Err: err}, true
		}
		warn(log, err, "writing the record failed", "step", c.Step)
		return cutover.RecordWritten{Step: c.Step, Version: v, Err: err}, true
	case cutover.CopyData:
		r, err := e.resharder(c.Instance)
		var task int64
		if err == nil {
			task, err = r.CopyData(ctx, c.Source, c.Destination, c.Publication, c.Slot)
		}
		warn(log, err, "COPY_DATA failed", "step", c.Step, "instance", c.Instance)
		return cutover.CopyStarted{Step: c.Step, Task: task, Err: err}, true
	case cutover.PollCopy:
		return e.poll(ctx, log, c), true
	case cutover.ListTasks:
		r, err := e.resharder(c.Instance)
		var tasks []adapters.Task
		if err == nil {
			tasks, err = r.Tasks(ctx)
		}
		warn(log, err, "SHOW TASKS failed", "step", c.Step, "instance", c.Instance)
		out := make([]cutover.Task, len(tasks))
		for i, t := range tasks {
			out[i] = task(t)
		}
		return cutover.TasksListed{Step: c.Step, Tasks: out, Err: err}, true
	case cutover.Cutover:
		r, err := e.resharder(c.Instance)
		if err == nil {
			err = e.drain(ctx, c)
		}
		if err == nil {
			err = r.Cutover(ctx, c.Task)
		}
		warn(log, err, "CUTOVER failed", "step", c.Step, "instance", c.Instance, "task", c.Task)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.StopTask:
		r, err := e.resharder(c.Instance)
		if err == nil {
			err = r.StopTask(ctx, c.Task)
		}
		warn(log, err, "STOP_TASK failed", "step", c.Step, "instance", c.Instance, "task", c.Task)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Pause:
		inst, err := e.instance(c.Instance)
		if err == nil {
			err = inst.Pause(ctx, c.Database)
		}
		warn(log, err, "PAUSE failed", "step", c.Step, "instance", c.Instance)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Resume:
		inst, err := e.instance(c.Instance)
		if err == nil {
			err = inst.Resume(ctx, c.Database)
		}
		warn(log, err, "RESUME failed", "step", c.Step, "instance", c.Instance)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Fence:
		b, err := e.backend(c.Backend)
		if err == nil {
			err = b.FenceWrites(ctx, c.Role)
		}
		warn(log, err, "fencing the shard failed", "step", c.Step, "shard", c.Shard)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Unfence:
		b, err := e.backend(c.Backend)
		if err == nil {
			err = b.UnfenceWrites(ctx, c.Role)
		}
		warn(log, err, "unfencing the shard failed", "step", c.Step, "shard", c.Shard)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.WriteFiles:
		files, err := e.render(c.Record)
		if err == nil {
			err = e.Target.WriteFiles(ctx, c.Generation, files)
		}
		warn(log, err, "writing the router files failed", "step", c.Step, "generation", c.Generation)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Reload:
		inst, err := e.instance(c.Instance)
		var files render.Files
		if err == nil {
			files, err = e.render(c.Record)
		}
		if err == nil {
			_, err = inst.Apply(ctx, c.Generation, files)
		}
		warn(log, err, "reload failed", "step", c.Step, "instance", c.Instance, "generation", c.Generation)
		return cutover.Reply{Step: c.Step, Err: err}, true
	case cutover.Alert:
		log.Error("cutover needs an operator", "step", c.Step, "reason", c.Reason)
		return nil, false
	case cutover.Done:
		level := slog.LevelInfo
		if c.Outcome == cutover.Halted || len(c.Lagging)+len(c.Missed)+len(c.Unresumed) > 0 {
			level = slog.LevelError
		}
		log.Log(ctx, level, "cutover ended", "outcome", c.String())
		if e.OnDone != nil {
			e.OnDone(c)
		}
		return nil, false
	}
	log.Error("cutover command this executor does not know; dropped", "cmd", fmt.Sprintf("%T", cmd))
	return nil, false
}

// drain waits, on every shard of c.Drain at once, until the stream of c's task has
// confirmed everything that shard's WAL held (adapters.SlotDrainer; its own timeout bounds
// the wait: postgres.Options.DrainTimeout). Any failure keeps the CUTOVER from being sent:
// PgDog's own wait before its swap reads a lag it refreshes once a second, and has let the
// swap go with acknowledged writes still in the stream (the adapters/pgdog package doc).
func (e *CutoverExecutor) drain(ctx context.Context, c cutover.Cutover) error {
	errs := make([]error, len(c.Drain))
	var wg sync.WaitGroup
	for i, d := range c.Drain {
		wg.Go(func() {
			b, err := e.backend(d.Backend)
			if err == nil {
				if sd, ok := b.(adapters.SlotDrainer); ok {
					err = sd.AwaitSlotDrain(ctx, d.Slot)
				} else {
					err = fmt.Errorf("%w: %s is a %T (give a backend that implements adapters.SlotDrainer, such as adapters/postgres.Backend)", ErrCannotDrain, BackendKey(d.Backend), b)
				}
			}
			if err != nil {
				errs[i] = fmt.Errorf("driver: draining slot %q on shard %s before CUTOVER: %w: %w", d.Slot, d.Shard, cutover.ErrNotSent, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// poll reads the copy task's row of SHOW TASKS and its slot's lag.
func (e *CutoverExecutor) poll(ctx context.Context, log *slog.Logger, c cutover.PollCopy) cutover.Input {
	r, err := e.resharder(c.Instance)
	var tasks []adapters.Task
	if err == nil {
		tasks, err = r.Tasks(ctx)
	}
	lag, known := int64(-1), false
	if err == nil {
		lag, known, err = r.SlotLag(ctx, c.Slot, c.Shards)
	}
	warn(log, err, "polling the copy failed", "step", c.Step, "instance", c.Instance)
	if !known {
		lag = -1
	}
	out := cutover.Task{ID: c.Task, State: cutover.TaskNotListed}
	for _, t := range tasks {
		if t.ID == c.Task {
			out = task(t)
		}
	}
	return cutover.CopyPolled{Step: c.Step, Task: out, LagBytes: lag, Err: err}
}

func task(t adapters.Task) cutover.Task {
	detail := t.Status
	if t.InnerStatus != "" {
		detail += " (" + t.InnerStatus + ")"
	}
	return cutover.Task{ID: t.ID, State: cutover.ClassifyTask(t.Status, t.InnerStatus), Detail: detail, Kind: t.Kind}
}

func (e *CutoverExecutor) instance(id string) (adapters.RouterInstance, error) {
	if inst, ok := lookup(e.Instance, id); ok {
		return inst, nil
	}
	return nil, fmt.Errorf("%w %q (not among the instances this driver was given)", ErrUnknownInstance, id)
}

func (e *CutoverExecutor) resharder(id string) (adapters.Resharder, error) {
	if r, ok := lookup(e.Resharder, id); ok {
		return r, nil
	}
	return nil, fmt.Errorf("%w: %q (give the designated instance's admin connection)", ErrNoResharder, id)
}

func (e *CutoverExecutor) backend(b shardmap.Backend) (adapters.ShardBackend, error) {
	if sb, ok := lookup(e.Backend, BackendKey(b)); ok {
		return sb, nil
	}
	return nil, fmt.Errorf("%w %s (not among the backends this driver was given)", ErrUnknownBackend, BackendKey(b))
}

func (e *CutoverExecutor) render(r *shardmap.Record) (render.Files, error) {
	if e.Render == nil {
		return nil, errors.New("driver: CutoverExecutor.Render is not set; it renders the files a generation's instances read")
	}
	files, err := e.Render(r)
	if err != nil {
		return nil, fmt.Errorf("driver: rendering generation %d: %w", r.Generation, err)
	}
	return files, nil
}

// Cutover is the Kind of the cutover machine, executed by exec (a *CutoverExecutor, or a
// wrapper around one). Alerts and the Done report reach the executor in issue order.
func Cutover(exec Executor[cutover.Input, cutover.Command]) Kind[cutover.Input, cutover.Command, cutover.Snapshot] {
	type M = Machine[cutover.Input, cutover.Command, cutover.Snapshot]
	return Kind[cutover.Input, cutover.Command, cutover.Snapshot]{
		Name:      "cutover",
		New:       func() M { return cutover.New() },
		Restore:   func(s cutover.Snapshot) (M, error) { return cutover.Restore(s) },
		Restarted: cutover.Restarted{},
		Timer:     func(t machine.TimerFired) cutover.Input { return cutover.TimerFired(t) },
		Exec:      exec,
		Ordered: func(c cutover.Command) bool {
			switch c.(type) {
			case cutover.Alert, cutover.Done:
				return true
			}
			return false
		},
	}
}
