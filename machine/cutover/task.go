package cutover

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Task is a PgDog background task as the machine needs to see it.
type Task struct {
	ID    int64
	State TaskState
	// Detail is PgDog's own status text, kept for alerts and traces.
	Detail string
	// Kind is SHOW TASKS's type column verbatim: what the task is and the databases it
	// works on ("reshard app -> app__reshard_4" for COPY_DATA app app__reshard_4, see
	// CopyOf; "replication app -> app__reshard_4 (reverse)" for the stream a CUTOVER
	// starts). "" when the lister does not say, which adopt takes for "could be anything".
	Kind string
}

// CopyOf reads the databases a COPY_DATA (or RESHARD) task copies between from its Kind:
// PgDog names that task "reshard <source> -> <destination>" (pgdog/src/api/resharding.rs,
// ReshardTask displays "reshard {orchestrator}"; backend/replication/logical/orchestrator.rs,
// Orchestrator displays the two databases' names; admin/show_tasks.rs lists it as the
// root row's type; recorded in adapters/pgdog/testdata/transcript*.json). ok is false for
// any other task. Only this names a copy: SHOW TASKS shows no slot, and SHOW
// REPLICATION_SLOTS names slots, not the task streaming through them.
func CopyOf(kind string) (source, destination string, ok bool) {
	rest, ok := strings.CutPrefix(kind, "reshard ")
	if !ok {
		return "", "", false
	}
	source, destination, ok = strings.Cut(rest, " -> ")
	if !ok || source == "" || destination == "" || strings.ContainsAny(source+destination, " ") {
		return "", "", false
	}
	return source, destination, true
}

// StreamOf reads the databases a replication stream carries between from its Kind: PgDog
// names the stream a CUTOVER starts "replication <source> -> <destination> (reverse)",
// named by the databases of the copy it reverses (admin/show_tasks.rs's root row type,
// recorded in adapters/pgdog/testdata/transcript-pg16.json), and a stream of its own
// "replication <source> -> <destination>". ok is false for any other task.
func StreamOf(kind string) (source, destination string, ok bool) {
	rest, ok := strings.CutPrefix(kind, "replication ")
	if !ok {
		return "", "", false
	}
	source, destination, ok = strings.Cut(strings.TrimSuffix(rest, " (reverse)"), " -> ")
	if !ok || source == "" || destination == "" || strings.ContainsAny(source+destination, " ") {
		return "", "", false
	}
	return source, destination, true
}

// TaskState is where a PgDog task is, reduced to what the cutover decides on.
type TaskState uint8

const (
	// TaskNotListed: SHOW TASKS does not list the task (the instance restarted, or the
	// task ended more than 24 h ago).
	TaskNotListed TaskState = iota
	// TaskSyncing: schema sync or data copy is still running.
	TaskSyncing
	// TaskReplicating: streaming changes; a COPY_DATA task in this state waits for CUTOVER.
	TaskReplicating
	// TaskCuttingOver: CUTOVER (or a rollback cutover) is in progress on the instance.
	TaskCuttingOver
	// TaskStopping: STOP_TASK is in progress.
	TaskStopping
	// TaskFinished: the task completed (for a COPY_DATA task: its cutover completed).
	TaskFinished
	// TaskCancelled: stopped by STOP_TASK or aborted.
	TaskCancelled
	// TaskFailed: failed or panicked; Detail holds PgDog's message.
	TaskFailed
	// TaskUnknown: a status this version does not know; treated as still in progress.
	TaskUnknown
)

var taskStateNames = []string{"not_listed", "syncing", "replicating", "cutting_over", "stopping", "finished", "cancelled", "failed", "unknown"}

func (s TaskState) String() string {
	if int(s) < len(taskStateNames) {
		return taskStateNames[s]
	}
	return "TaskState(" + strconv.Itoa(int(s)) + ")"
}

// active reports whether the task is still doing something.
func (s TaskState) active() bool {
	switch s {
	case TaskSyncing, TaskReplicating, TaskCuttingOver, TaskStopping, TaskUnknown:
		return true
	}
	return false
}

// ClassifyTask maps a SHOW TASKS row (its status and inner_status columns) to a TaskState.
// It is where PgDog's wording lives, so executors stay free of it. Status is one of
// started, running, finished, cancelling, cancelled, "failed: <msg>", "panicked: <msg>";
// inner_status is syncing schema, syncing data, finalizing schema, replicating,
// cutting over, rolling back or stopping (PgDog 0.1.54, api/async_task.rs).
func ClassifyTask(status, inner string) TaskState {
	switch {
	case status == "finished":
		return TaskFinished
	case status == "cancelled", status == "cancelling":
		return TaskCancelled
	case strings.HasPrefix(status, "failed"), strings.HasPrefix(status, "panicked"):
		return TaskFailed
	case status != "started" && status != "running":
		return TaskUnknown
	}
	switch inner {
	case "syncing schema", "syncing data", "finalizing schema", "":
		return TaskSyncing
	case "replicating":
		return TaskReplicating
	case "cutting over", "rolling back":
		return TaskCuttingOver
	case "stopping":
		return TaskStopping
	}
	return TaskUnknown
}

// taskRef is a task the machine holds, or none. PgDog numbers its tasks from 0 after every
// start (pgdog/src/api/async_task.rs: TasksMap.next_id is a fetch_add on a counter that
// starts at 0), so id 0 is a task, never "no task": the first COPY_DATA of a freshly
// started PgDog gets it.
type taskRef struct {
	ID  int64
	Set bool
}

func some(id int64) taskRef { return taskRef{ID: id, Set: true} }

// MarshalJSON writes null for none and {"id":N} for a task, so that a snapshot of task 0
// cannot be read as one taken by a version that stored the bare id (where 0 meant none).
func (t taskRef) MarshalJSON() ([]byte, error) {
	if !t.Set {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		ID int64 `json:"id"`
	}{t.ID})
}

// UnmarshalJSON reads what MarshalJSON writes and, from snapshots of earlier versions, the
// bare id they stored, where 0 meant no task.
func (t *taskRef) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*t = taskRef{}
		return nil
	case strings.HasPrefix(s, "{"):
		var v struct {
			ID *int64 `json:"id"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("task: %w", err)
		}
		if v.ID == nil || *v.ID < 0 {
			return fmt.Errorf("task %s: want {\"id\": <id ≥ 0>} or null", s)
		}
		*t = some(*v.ID)
		return nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return fmt.Errorf("task %s: want {\"id\": <id ≥ 0>}, null, or (from an earlier version) a bare id", s)
	}
	*t = taskRef{}
	if id != 0 {
		*t = some(id)
	}
	return nil
}
