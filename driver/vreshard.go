package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/machine"
	"loam.dev/router/machine/vreshard"
)

// ErrVerifyFailed marks a VReshardExecutor.Verify failure that is the check's verdict (rows
// missing or on the wrong shard through vtgate), not a failure to run it: the machine then
// reverses the traffic instead of asking again.
var ErrVerifyFailed = errors.New("driver: the check through vtgate failed")

// VReshardExecutor executes the Vitess Reshard machine's commands: the workflow's steps
// through Workflows (adapters/vtctld), the serving partition through Control, the record
// on Store, and Verify through vtgate. Every command is made idempotent here, as the
// machine requires: a workflow that exists with the same shards counts as created, a
// switch to where the traffic already is as done, a complete or cancel of a workflow that
// is gone as done.
type VReshardExecutor struct {
	DB        adapters.DBRef
	Store     adapters.ShardMapStore
	Workflows adapters.VitessWorkflows
	Control   adapters.VitessControl
	// Verify checks through vtgate that keyspace serves its rows from shards; an error
	// wrapping ErrVerifyFailed is the verdict (the machine reverses), any other is retried.
	Verify func(ctx context.Context, keyspace string, shards []string) error
	// OnDone, when set, receives the end.
	OnDone func(vreshard.Done)
	Logger *slog.Logger
}

// Execute performs one command; see vreshard.Command for what each must do.
func (e *VReshardExecutor) Execute(ctx context.Context, cmd vreshard.Command) (vreshard.Input, bool) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	w := e.Workflows
	switch c := cmd.(type) {
	case vreshard.Inspect:
		f, err := e.inspect(ctx, c)
		warn(log, err, "reading the reshard's pre-flight facts failed", "step", c.Step)
		return vreshard.Inspected{Step: c.Step, Attempt: c.Attempt, Facts: f, Err: err}, true
	case vreshard.ReadServing:
		parts, err := e.Control.SrvKeyspace(ctx, c.Keyspace, c.Cell)
		in := vreshard.Serving{Step: c.Step, Attempt: c.Attempt, Err: err}
		for _, s := range adapters.Serving(parts, adapters.TabletPrimary) {
			in.Primary = append(in.Primary, vreshard.SrvShard{Name: s.Name, Range: s.Range})
		}
		for _, s := range adapters.Serving(parts, adapters.TabletReplica) {
			in.Replica = append(in.Replica, vreshard.SrvShard{Name: s.Name, Range: s.Range})
		}
		warn(log, err, "reading the serving partition failed", "step", c.Step)
		return in, true
	case vreshard.WriteRecord:
		v, err := e.Store.CAS(ctx, e.DB, c.Expect, c.Record)
		var conflict *adapters.ConflictError
		if errors.As(err, &conflict) {
			return vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Conflict: conflict.Current, Err: err}, true
		}
		warn(log, err, "mirroring the serving partition into the record failed", "step", c.Step)
		return vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Version: v, Err: err}, true
	case vreshard.Create:
		st, err := w.Workflow(ctx, c.Keyspace, c.Workflow)
		permanent := false
		switch {
		case err == nil:
			if !sameSet(st.Source, c.Source) || !sameSet(st.Target, c.Target) {
				err, permanent = fmt.Errorf("driver: workflow %s.%s exists but reshards %v into %v, not %v into %v; name another workflow or cancel that one",
					c.Keyspace, c.Workflow, st.Source, st.Target, c.Source, c.Target), true
			}
		case errors.Is(err, adapters.ErrNotFound):
			err = w.ReshardCreate(ctx, c.Keyspace, c.Workflow, []string{c.Cell}, c.Source, c.Target)
		}
		warn(log, err, "creating the Reshard workflow failed", "step", c.Step)
		return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: err, Permanent: permanent}, true
	case vreshard.Status:
		st, err := w.Workflow(ctx, c.Keyspace, c.Workflow)
		return vreshard.Progress{Step: c.Step, Attempt: c.Attempt, Copying: st.Copying, LagMs: st.LagSeconds * 1000, Failed: st.Failed, Err: err}, true
	case vreshard.VDiff:
		r, err := w.VDiff(ctx, c.Keyspace, c.Workflow, c.UUID)
		if err == nil && r.Failed != "" {
			err = fmt.Errorf("driver: VDiff %s is in error: %s", c.UUID, r.Failed)
		}
		warn(log, err, "the VDiff failed", "step", c.Step, "uuid", c.UUID)
		return vreshard.Diffed{Step: c.Step, Attempt: c.Attempt, Done: r.Done, Mismatch: r.Mismatch, Rows: r.Rows, Err: err}, true
	case vreshard.Switch:
		err := e.switchTraffic(ctx, c)
		warn(log, err, "switching traffic failed", "step", c.Step, "types", c.Types, "reverse", c.Reverse)
		return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case vreshard.Verify:
		err := errors.New("driver: no VReshardExecutor.Verify to check the keyspace through vtgate")
		if e.Verify != nil {
			err = e.Verify(ctx, c.Keyspace, c.Shards)
		}
		warn(log, err, "the check through vtgate failed", "step", c.Step)
		return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: err, Permanent: errors.Is(err, ErrVerifyFailed)}, true
	case vreshard.Complete:
		err := w.CompleteWorkflow(ctx, c.Keyspace, c.Workflow)
		if errors.Is(err, adapters.ErrNotFound) {
			err = nil // completed before, its answer lost
		}
		warn(log, err, "completing the workflow failed", "step", c.Step)
		return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case vreshard.Cancel:
		err := w.CancelWorkflow(ctx, c.Keyspace, c.Workflow)
		if errors.Is(err, adapters.ErrNotFound) {
			err = nil // cancelled before, or never created
		}
		warn(log, err, "cancelling the workflow failed", "step", c.Step)
		return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: err}, true
	case vreshard.Alert:
		log.Error("reshard needs an operator", "step", c.Step, "reason", c.Reason)
		return nil, false
	case vreshard.Done:
		level := slog.LevelInfo
		if c.Outcome != vreshard.Completed {
			level = slog.LevelError
		}
		log.Log(ctx, level, "reshard ended", "outcome", c.String())
		if e.OnDone != nil {
			e.OnDone(c)
		}
		return nil, false
	}
	log.Error("reshard command this executor does not know; dropped", "cmd", fmt.Sprintf("%T", cmd))
	return nil, false
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// switchTraffic switches c.Types unless the workflow's traffic already is where c asks.
func (e *VReshardExecutor) switchTraffic(ctx context.Context, c vreshard.Switch) error {
	st, err := e.Workflows.Workflow(ctx, c.Keyspace, c.Workflow)
	if err != nil {
		return err
	}
	writes := slices.Contains(c.Types, "primary")
	reads := slices.Contains(c.Types, "replica") || slices.Contains(c.Types, "rdonly")
	switch {
	case !c.Reverse && (!writes || st.WritesSwitched) && (!reads || st.ReadsSwitched):
		return nil
	case c.Reverse && (!writes || !st.WritesSwitched) && (!reads || !st.ReadsSwitched):
		return nil
	}
	var types []adapters.TabletType
	for _, t := range c.Types {
		switch t {
		case "primary":
			types = append(types, adapters.TabletPrimary)
		case "replica":
			types = append(types, adapters.TabletReplica)
		case "rdonly":
			types = append(types, adapters.TabletRdonly)
		default:
			return fmt.Errorf("driver: tablet type %q is not primary, replica or rdonly", t)
		}
	}
	return e.Workflows.SwitchTraffic(ctx, c.Keyspace, c.Workflow, types, c.Reverse)
}

// inspect gathers the pre-flight facts: each shard's record, each source primary's binlog
// settings, the VSchema, and the tables of the first source's schema.
func (e *VReshardExecutor) inspect(ctx context.Context, c vreshard.Inspect) (vreshard.Facts, error) {
	var f vreshard.Facts
	w := e.Workflows
	for _, n := range append(slices.Clone(c.Source), c.Target...) {
		s, err := w.Shard(ctx, c.Keyspace, n)
		if errors.Is(err, adapters.ErrNotFound) {
			continue
		}
		if err != nil {
			return f, err
		}
		f.Shards = append(f.Shards, vreshard.ShardFacts{Name: n, Serving: s.Serving, Primary: s.Primary})
	}
	first := ""
	for _, sh := range f.Shards {
		if !slices.Contains(c.Source, sh.Name) || sh.Primary == "" {
			continue
		}
		rows, err := w.Fetch(ctx, sh.Primary, "SELECT @@global.binlog_format, @@global.binlog_row_image, @@version")
		if err != nil {
			return f, err
		}
		if len(rows) != 1 || len(rows[0]) != 3 {
			return f, fmt.Errorf("driver: the binlog settings of %s came back as %d rows", sh.Primary, len(rows))
		}
		b := vreshard.BinlogFacts{Shard: sh.Name, Format: string(rows[0][0]), Image: string(rows[0][1])}
		if strings.Contains(strings.ToLower(string(rows[0][2])), "mariadb") {
			b.GTID = true // MariaDB always has GTIDs
		} else {
			g, err := w.Fetch(ctx, sh.Primary, "SELECT @@global.gtid_mode")
			if err != nil {
				return f, err
			}
			b.GTID = len(g) == 1 && len(g[0]) == 1 && strings.EqualFold(string(g[0][0]), "ON")
		}
		f.Sources = append(f.Sources, b)
		if first == "" {
			first = sh.Primary
		}
	}
	vs, err := w.VSchema(ctx, c.Keyspace)
	if err != nil {
		return f, err
	}
	f.Sharded = vs.Sharded
	if first != "" {
		rows, err := w.Fetch(ctx, first, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name")
		if err != nil {
			return f, err
		}
		for _, r := range rows {
			name := string(r[0])
			t := vs.Tables[name]
			f.Tables = append(f.Tables, vreshard.TableFacts{Name: name, Type: t.Type, PrimaryVindex: t.PrimaryVindex})
		}
	}
	return f, nil
}

// VReshard is the Kind of the Vitess Reshard machine, executed by exec (a
// *VReshardExecutor, or a wrapper around one).
func VReshard(exec Executor[vreshard.Input, vreshard.Command]) Kind[vreshard.Input, vreshard.Command, vreshard.Snapshot] {
	type M = Machine[vreshard.Input, vreshard.Command, vreshard.Snapshot]
	return Kind[vreshard.Input, vreshard.Command, vreshard.Snapshot]{
		Name:      "vreshard",
		New:       func() M { return vreshard.New() },
		Restore:   func(s vreshard.Snapshot) (M, error) { return vreshard.Restore(s) },
		Restarted: vreshard.Restarted{},
		Timer:     func(t machine.TimerFired) vreshard.Input { return vreshard.TimerFired(t) },
		Exec:      exec,
		Ordered: func(c vreshard.Command) bool {
			switch c.(type) {
			case vreshard.Alert, vreshard.Done:
				return true
			}
			return false
		},
	}
}
