package pgdog

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/adapters"
)

// The resharding commands. PgDog runs them on this instance only; all four migration
// commands need a users.toml user with schema_admin = true on both databases, or they fail
// with "database ... has no schema owner".

// Instance is the Resharder of a cutover's designated instance.
var _ adapters.Resharder = (*Instance)(nil)

var reshardKinds = []string{"source database", "destination database", "publication", "replication slot"}

// CopyStarted is COPY_DATA's reply.
type CopyStarted struct {
	Task int64
	// Slot is the replication slot the task streams from: the one asked for, or PgDog's
	// default name (__pgdog_repl_ and 19 random lower-case characters).
	Slot string
}

// StartCopyData sends COPY_DATA <source> <destination> <publication> [slot]: schema sync,
// copy, then replication that waits for an explicit CUTOVER. slot may be "" for PgDog's
// default name.
func (i *Instance) StartCopyData(ctx context.Context, source, destination, publication, slot string) (CopyStarted, error) {
	cmd, err := i.withName("CopyData", "COPY_DATA", reshardKinds, source, destination, publication, slot)
	if err != nil {
		return CopyStarted{}, err
	}
	if source == "" || destination == "" || publication == "" {
		return CopyStarted{}, i.fail("CopyData", "", fmt.Errorf("%w: COPY_DATA needs a source, a destination and a publication", ErrName))
	}
	r, err := i.Exec(ctx, "CopyData", cmd)
	if err != nil {
		return CopyStarted{}, err
	}
	id, err := taskID("COPY_DATA", r)
	if err != nil {
		return CopyStarted{}, i.fail("CopyData", "", err)
	}
	s, err := oneValue("COPY_DATA", r, "replication_slot")
	if err != nil {
		return CopyStarted{}, i.fail("CopyData", "", err)
	}
	return CopyStarted{Task: id, Slot: s}, nil
}

// CopyData is StartCopyData returning the task id (the cutover's Resharder seam). slot is
// required there, so that a retried call can find the task it started.
func (i *Instance) CopyData(ctx context.Context, source, destination, publication, slot string) (int64, error) {
	if slot == "" {
		return 0, i.fail("CopyData", "", fmt.Errorf("%w: name the replication slot, so a retry can recognise its task", ErrName))
	}
	c, err := i.StartCopyData(ctx, source, destination, publication, slot)
	return c.Task, err
}

// Reshard sends RESHARD <source> <destination> <publication> [slot]: the whole pipeline in
// the background, with an automatic cutover on this instance only when replication has
// caught up. For N instances use CopyData and an explicit Cutover instead.
func (i *Instance) Reshard(ctx context.Context, source, destination, publication, slot string) (int64, error) {
	cmd, err := i.withName("Reshard", "RESHARD", reshardKinds, source, destination, publication, slot)
	if err != nil {
		return 0, err
	}
	if source == "" || destination == "" || publication == "" {
		return 0, i.fail("Reshard", "", fmt.Errorf("%w: RESHARD needs a source, a destination and a publication", ErrName))
	}
	r, err := i.Exec(ctx, "Reshard", cmd)
	if err != nil {
		return 0, err
	}
	id, err := taskID("RESHARD", r)
	if err != nil {
		return 0, i.fail("Reshard", "", err)
	}
	return id, nil
}

// Cutover sends CUTOVER <task> and returns once the cutover is done: drain, swap the two
// databases' names in this instance's memory, start the reverse stream, switch
// maintenance off (every hold on the instance, operators' included). PgDog's CUTOVER only
// requests it: its OK says the task took the request, and the task then waits for the
// copy to catch up (pausing the instance's traffic itself, with maintenance mode, once
// the lag is under cutover_traffic_stop_threshold), swaps, starts the reverse stream as a
// new task and finishes. So Cutover lists the tasks until task is finished (nil), or
// ended otherwise, failed, cancelled or no longer listed (an error matching ErrExecution:
// a failure after the swap leaves it in place). It is never retried here: an error, ctx's
// included, leaves the outcome to be read from SHOW TASKS. With nothing to cut over PgDog
// fails ("task is not a replication task"), which matches ErrExecution.
func (i *Instance) Cutover(ctx context.Context, task int64) error {
	r, err := i.Exec(ctx, "Cutover", "CUTOVER "+strconv.FormatInt(task, 10))
	if err != nil {
		return err
	}
	if err := cutoverAccepted(task, r); err != nil {
		return i.fail("Cutover", "", err)
	}
	return i.waitCutover(ctx, task)
}

// cutoverAccepted checks CUTOVER's answer: one row "OK" in column cutover (PgDog 3ee07ab,
// 9918e963), or, from a version that answers with the tag alone, no rows at all.
func cutoverAccepted(task int64, r Reply) error {
	if len(r.Columns) == 0 && len(r.Rows) == 0 {
		if verb, _, _ := strings.Cut(r.Tag, " "); !strings.EqualFold(verb, "CUTOVER") {
			return fmt.Errorf("%w: CUTOVER %d answered with tag %q and no rows", ErrReply, task, r.Tag)
		}
		return nil
	}
	v, err := oneValue("CUTOVER", r, "cutover")
	if err != nil {
		return err
	}
	if v != "OK" {
		return fmt.Errorf("%w: CUTOVER %d answered %q, want OK", ErrReply, task, v)
	}
	return nil
}

// cutoverPoll is how often Cutover lists the tasks while the cutover runs.
const cutoverPoll = 50 * time.Millisecond

// waitCutover lists the tasks until task has ended.
func (i *Instance) waitCutover(ctx context.Context, task int64) error {
	tick := time.NewTicker(cutoverPoll)
	defer tick.Stop()
	for {
		tasks, err := i.Tasks(ctx)
		if err != nil {
			return err
		}
		var own *adapters.Task
		for j := range tasks {
			if tasks[j].ID == task {
				own = &tasks[j]
			}
		}
		switch {
		case own == nil:
			return i.fail("Cutover", "", fmt.Errorf("%w: CUTOVER %d was accepted, then the task is no longer listed (the instance restarted?)", ErrExecution, task))
		case own.Status == "finished":
			return nil
		case own.Status != "started" && own.Status != "running":
			return i.fail("Cutover", "", fmt.Errorf("%w: CUTOVER %d was accepted, then the task ended %q (%s)", ErrExecution, task, own.Status, own.InnerStatus))
		}
		select {
		case <-ctx.Done():
			return i.fail("Cutover", "", fmt.Errorf("pgdog: CUTOVER %d accepted, still %s (%s): %w", task, own.Status, own.InnerStatus, ctx.Err()))
		case <-tick.C:
		}
	}
}

// StopResult is STOP_TASK's reply.
type StopResult uint8

const (
	Stopped      StopResult = iota + 1 // "OK"
	TaskNotFound                       // "task not found"
)

func (s StopResult) String() string {
	switch s {
	case Stopped:
		return "stopped"
	case TaskNotFound:
		return "task not found"
	}
	return "StopResult(" + strconv.Itoa(int(s)) + ")"
}

// Stop sends STOP_TASK <task>. For the reverse stream after a cutover, this finalizes: it
// drops the permanent slot.
func (i *Instance) Stop(ctx context.Context, task int64) (StopResult, error) {
	r, err := i.Exec(ctx, "StopTask", "STOP_TASK "+strconv.FormatInt(task, 10))
	if err != nil {
		return 0, err
	}
	v, err := oneValue("STOP_TASK", r, "stop_task")
	if err != nil {
		return 0, i.fail("StopTask", "", err)
	}
	switch v {
	case "OK":
		return Stopped, nil
	case "task not found":
		return TaskNotFound, nil
	}
	return 0, i.fail("StopTask", "", fmt.Errorf("%w: STOP_TASK %d answered %q, want OK or \"task not found\"", ErrReply, task, v))
}

// StopTask is Stop for the cutover's Resharder seam: a task that is not found is gone
// either way, so it is not an error.
func (i *Instance) StopTask(ctx context.Context, task int64) error {
	_, err := i.Stop(ctx, task)
	return err
}
