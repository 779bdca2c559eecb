package cutover

import (
	"strconv"
	"strings"
)

// Task is a PgDog background task as the machine needs to see it.
type Task struct {
	ID    int64
	State TaskState
	// Detail is PgDog's own status text, kept for alerts and traces.
	Detail string
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
