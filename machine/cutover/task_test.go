package cutover_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/cutover"
)

func TestClassifyTask(t *testing.T) {
	for _, tc := range []struct {
		status, inner string
		want          cutover.TaskState
	}{
		{"started", "syncing schema", cutover.TaskSyncing},
		{"running", "syncing data", cutover.TaskSyncing},
		{"running", "finalizing schema", cutover.TaskSyncing},
		{"running", "replicating", cutover.TaskReplicating},
		{"running", "cutting over", cutover.TaskCuttingOver},
		{"running", "rolling back", cutover.TaskCuttingOver},
		{"running", "stopping", cutover.TaskStopping},
		{"running", "something new", cutover.TaskUnknown},
		{"finished", "replicating", cutover.TaskFinished},
		{"cancelling", "", cutover.TaskCancelled},
		{"cancelled", "", cutover.TaskCancelled},
		{"failed: connection refused", "", cutover.TaskFailed},
		{"panicked: index out of bounds", "", cutover.TaskFailed},
		{"paused", "", cutover.TaskUnknown},
	} {
		require.Equal(t, tc.want, cutover.ClassifyTask(tc.status, tc.inner), "%q/%q", tc.status, tc.inner)
	}
}

// FuzzSnapshotJSON: decoding any bytes as a snapshot never panics, and whatever decodes
// encodes back to the same bytes on a second round.
func FuzzSnapshotJSON(f *testing.F) {
	for _, n := range []int{1, 3} {
		ins := script(n)
		m := cutover.New()
		ctx := ctxFor()
		for i, in := range ins {
			m.On(ctx, in)
			if i%5 == 0 {
				b, err := json.Marshal(m.Snapshot())
				require.NoError(f, err)
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"Origin":{"version":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s cutover.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		b1, err := json.Marshal(s)
		if err != nil {
			return // a record that decodes but does not encode (an enum out of range)
		}
		if m, err := cutover.Restore(s); err == nil {
			m.On(ctxFor(), cutover.Restarted{}) // a snapshot Restore accepts never makes the machine panic
			m.On(ctxFor(), cutover.Reply{Step: "app/4/fence/s0"})
			m.On(ctxFor(), cutover.TimerFired{ID: "app/4/grace"})
		}
		var s2 cutover.Snapshot
		require.NoError(t, json.Unmarshal(b1, &s2))
		b2, err := json.Marshal(s2)
		require.NoError(t, err)
		require.JSONEq(t, string(b1), string(b2))
	})
}
