package refrouter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/pgdog"
)

// TestShowTasksReadBackByThePgDogAdapter: the stand-in's SHOW TASKS rows, decoded and
// reduced to root tasks by the PgDog adapter (what a controller sees over the wire), give
// back the tasks the stand-in holds. A copy that replicates must read as replicating: the
// adapter takes a "reshard" root that says so without its running "replication" subtask
// row for one still setting up, and a cutover over the wire then polls it as syncing until
// its catch-up deadline (TestEtcdLeaderKilledMidCutoverProcesses hung in its copy so).
func TestShowTasksReadBackByThePgDogAdapter(t *testing.T) {
	tasks := []adapters.Task{
		{ID: 0, Kind: "reshard app -> app__reshard_2", Status: "finished"},
		{ID: 1, Kind: "replication app -> app__reshard_2 (reverse)", Status: "running", InnerStatus: "replicating", Elapsed: 3 * time.Second},
		{ID: 2, Kind: "reshard app -> app__reshard_3", Status: "running", InnerStatus: "syncing data", Elapsed: time.Second},
		{ID: 3, Kind: "reshard other -> other__reshard_2", Status: "running", InnerStatus: "replicating", Elapsed: 2 * time.Second},
	}
	rows := taskRows(tasks, time.Now())
	reply := pgdog.Reply{Columns: []string{"id", "scope", "type", "status", "inner_status", "started_at", "updated_at", "elapsed", "elapsed_ms"}}
	for _, r := range rows {
		row := make([][]byte, len(r))
		for i, c := range r {
			if c != nil {
				row[i] = []byte(*c)
			}
		}
		reply.Rows = append(reply.Rows, row)
	}
	decoded, err := pgdog.DecodeTasks(reply)
	require.NoError(t, err)
	require.Equal(t, tasks, pgdog.RootTasks(decoded))
}
