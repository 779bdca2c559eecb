package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// ErrUnknownInstance is returned for a command naming a router instance the executor
// cannot find.
var ErrUnknownInstance = errors.New("driver: unknown router instance")

// ConfigPushExecutor executes configpush commands: WriteFiles on the Target, Reload as the
// instance's Apply, Observe as its Observe.
type ConfigPushExecutor struct {
	Target adapters.ConfigTarget
	// Instance finds a router instance by id (see Lookup).
	Instance func(id string) (adapters.RouterInstance, bool)
	// FilesSeen answers AwaitFiles (configpush.Options.AwaitFiles, on Kubernetes): the
	// generation of the files instance id sees where it reads them, for example
	// adapters/kubernetes.VisibleGeneration on its mounted directory. Unset, AwaitFiles is
	// answered with an error, so a machine that waits never reloads.
	FilesSeen func(ctx context.Context, id string) (uint64, error)
	// OnOutcome, when set, receives every push's Outcome (it is logged either way).
	OnOutcome func(configpush.Outcome)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Lookup finds values in a fixed map; use it for ConfigPushExecutor.Instance and
// InDoubtExecutor.Shard when the set does not change during a run.
func Lookup[T any](m map[string]T) func(string) (T, bool) {
	return func(k string) (T, bool) { v, ok := m[k]; return v, ok }
}

// Execute performs one command; see configpush.Command for what each must do.
func (e *ConfigPushExecutor) Execute(ctx context.Context, cmd configpush.Command) (configpush.Input, bool) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	switch c := cmd.(type) {
	case configpush.WriteFiles:
		err := newerGeneration(e.Target.WriteFiles(ctx, c.Generation, c.Files))
		warn(log, err, "writing the router files failed", "step", c.Step, "attempt", c.Attempt)
		return configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case configpush.Reload:
		inst, err := e.instance(c.Instance)
		if err == nil {
			_, err = inst.Apply(ctx, c.Generation, c.Files)
		}
		warn(log, err, "reload failed", "step", c.Step, "attempt", c.Attempt, "instance", c.Instance)
		return configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Err: err}, true
	case configpush.AwaitFiles:
		var gen uint64
		err := fmt.Errorf("driver: configpush waits for the files (Options.AwaitFiles) but ConfigPushExecutor.FilesSeen is unset; set it to read what instance %q sees", c.Instance)
		if e.FilesSeen != nil {
			gen, err = e.FilesSeen(ctx, c.Instance)
		}
		warn(log, err, "reading which files the instance sees failed", "step", c.Step, "attempt", c.Attempt, "instance", c.Instance)
		return configpush.FilesSeen{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: gen, Err: err}, true
	case configpush.Observe:
		inst, err := e.instance(c.Instance)
		var o adapters.Observed
		if err == nil {
			o, err = inst.Observe(ctx)
		}
		warn(log, err, "observing the instance failed", "step", c.Step, "attempt", c.Attempt, "instance", c.Instance)
		return configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: o.Generation, Known: o.GenerationKnown, Err: err}, true
	case configpush.Outcome:
		level := slog.LevelInfo
		if c.Refused != "" || c.FilesErr != "" || len(c.Stuck) > 0 {
			level = slog.LevelError
		}
		log.Log(ctx, level, "config push ended", "outcome", c.String())
		if e.OnOutcome != nil {
			e.OnOutcome(c)
		}
		return nil, false
	}
	log.Error("configpush command this executor does not know; dropped", "cmd", fmt.Sprintf("%T", cmd))
	return nil, false
}

func (e *ConfigPushExecutor) instance(id string) (adapters.RouterInstance, error) {
	if inst, ok := lookup(e.Instance, id); ok {
		return inst, nil
	}
	return nil, fmt.Errorf("%w %q (not among the instances this driver was given)", ErrUnknownInstance, id)
}

// lookup calls find, which may be nil (it finds nothing).
func lookup[T any](find func(string) (T, bool), k string) (T, bool) {
	if find == nil {
		var zero T
		return zero, false
	}
	return find(k)
}

// newerGeneration makes a target's adapters.ErrNewerGeneration also match
// configpush.ErrNewerGeneration, which the machine branches on: the seam and the machine
// each own their sentinel, and the driver is where they meet.
func newerGeneration(err error) error {
	if errors.Is(err, adapters.ErrNewerGeneration) && !errors.Is(err, configpush.ErrNewerGeneration) {
		return fmt.Errorf("%w: %w", configpush.ErrNewerGeneration, err)
	}
	return err
}

func warn(log *slog.Logger, err error, msg string, args ...any) {
	if err != nil {
		log.Warn(msg, append(args, "err", err)...)
	}
}

// ConfigPush is the Kind of the configpush machine, executed by exec (a
// *ConfigPushExecutor, or a wrapper around one). Its snapshot keeps the digest of a push's
// files, never the files (users.toml carries every password); restored without a way to
// render them again, an unfinished push ends with nothing written and the next Push starts
// it again. ConfigPushRendered restores with the files.
func ConfigPush(exec Executor[configpush.Input, configpush.Command], opts configpush.Options) Kind[configpush.Input, configpush.Command, configpush.Snapshot] {
	return ConfigPushRendered(exec, opts, nil)
}

// Rerender renders the files of the record in the store now, with the secrets of now: what
// a restored configpush machine gets back instead of the files its snapshot does not keep.
type Rerender func() (*shardmap.Record, render.Files, error)

// ConfigPushRendered is ConfigPush restoring with the files rerender renders (see
// configpush.RestoreWithFiles): a push cut short by a crash goes on at once if they match
// the snapshot's digest, and ends with configpush.ErrFilesChanged, nothing of it written,
// if they do not (a rotated password, or a snapshot written by someone else).
func ConfigPushRendered(exec Executor[configpush.Input, configpush.Command], opts configpush.Options, rerender Rerender) Kind[configpush.Input, configpush.Command, configpush.Snapshot] {
	type M = Machine[configpush.Input, configpush.Command, configpush.Snapshot]
	restore := func(s configpush.Snapshot) (M, error) {
		if rerender == nil {
			return configpush.Restore(s, opts)
		}
		rec, files, err := rerender()
		if err != nil {
			return nil, fmt.Errorf("rendering the files again to restore the push: %w", err)
		}
		return configpush.RestoreWithFiles(s, rec, files, opts)
	}
	return Kind[configpush.Input, configpush.Command, configpush.Snapshot]{
		Name:      "configpush",
		New:       func() M { return configpush.New(opts) },
		Restore:   restore,
		Restarted: configpush.Restarted{},
		Timer:     func(t machine.TimerFired) configpush.Input { return configpush.TimerFired(t) },
		Exec:      exec,
		Ordered:   func(c configpush.Command) bool { _, ok := c.(configpush.Outcome); return ok },
	}
}
