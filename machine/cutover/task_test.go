package cutover_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
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
	f.Add([]byte(`{"Task":7,"ReverseTask":0,"ReReverseTask":null}`)) // bare ids, as before task 0 was a task
	f.Add([]byte(`{"Task":{"id":0},"ReverseTask":{"id":1}}`))
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

// TestSnapshotTaskIDs: a snapshot keeps task 0 as a task (the first COPY_DATA of a freshly
// started PgDog answers task_id 0), and a snapshot saved by a version that stored the bare
// id, where 0 meant no task, still restores as it meant.
func TestSnapshotTaskIDs(t *testing.T) {
	ctx := &machine.Ctx{Now: 1000}
	// copying is a machine polling copy task id.
	copying := func(id int64) *cutover.Machine {
		m := cutover.New()
		plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub"}
		m.On(ctx, cutover.Start{Record: fixture(), Plan: plan})
		m.On(ctx, cutover.RecordWritten{Step: "app/4/begin@12", Version: 13})
		m.On(ctx, cutover.CopyStarted{Step: "app/4/copy/pgdog-1", Task: id})
		return m
	}
	restore := func(data string) *cutover.Machine {
		t.Helper()
		var s cutover.Snapshot
		require.NoError(t, json.Unmarshal([]byte(data), &s))
		m, err := cutover.Restore(s)
		require.NoError(t, err)
		return m
	}
	save := func(m *cutover.Machine) string {
		data, err := json.Marshal(m.Snapshot())
		require.NoError(t, err)
		return string(data)
	}
	// stops is what the rollback a Reverse before the point of no return starts sends.
	stops := func(m *cutover.Machine) []string {
		var out []string
		for _, c := range m.On(ctx, cutover.Reverse{}) {
			if _, ok := c.(cutover.StopTask); ok {
				out = append(out, c.String())
			}
		}
		return out
	}

	zero := save(copying(0))
	require.Contains(t, zero, `"Task":{"id":0}`)
	require.Contains(t, zero, `"ReverseTask":null`)
	require.Equal(t, []string{"StopTask step=app/4/undo/stop/pgdog-1 instance=pgdog-1 task=0"}, stops(restore(zero)),
		"copy task 0 is stopped by the rollback")

	// Written by the version before: bare ids, 0 for none.
	seven := save(copying(7))
	with := func(task any) string {
		t.Helper()
		var f map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(seven), &f))
		v, err := json.Marshal(task)
		require.NoError(t, err)
		f["Task"], f["ReverseTask"], f["ReReverseTask"] = v, json.RawMessage("0"), json.RawMessage("0")
		out, err := json.Marshal(f)
		require.NoError(t, err)
		return string(out)
	}
	require.Equal(t, stops(restore(seven)), stops(restore(with(7))))
	require.Equal(t, []string{"StopTask step=app/4/undo/stop/pgdog-1 instance=pgdog-1 task=7"}, stops(restore(with(7))))
	require.Empty(t, stops(restore(with(0))), "a bare 0 was that version's 'no task'")

	for _, bad := range []any{-1, "7", map[string]int{"id": -2}, map[string]int{}} {
		var s cutover.Snapshot
		require.Error(t, json.Unmarshal([]byte(with(bad)), &s), "%v", bad)
	}
}

// TestTaskKinds: the SHOW TASKS types PgDog gives a copy and a stream (recorded in
// adapters/pgdog/testdata/transcript-pg16.json) name their databases; nothing else does.
func TestTaskKinds(t *testing.T) {
	for _, tc := range []struct {
		kind             string
		copySrc, copyDst string // CopyOf, "" when not a copy
		strSrc, strDst   string // StreamOf, "" when not a stream
	}{
		{kind: "reshard app -> app__reshard_4", copySrc: "app", copyDst: "app__reshard_4"},
		{kind: "replication app -> app__reshard_4 (reverse)", strSrc: "app", strDst: "app__reshard_4"},
		{kind: "replication app -> app__reshard_4", strSrc: "app", strDst: "app__reshard_4"},
		{kind: "copy_data app -> app__reshard_4"},
		{kind: "schema_sync(pre) app -> app__reshard_4"},
		{kind: "reshard app"},
		{kind: "reshard  -> x"},
		{kind: "reshard a b -> c"},
		{kind: "replication a ->  (reverse)"},
		{kind: "replication"},
		{kind: ""},
	} {
		src, dst, ok := cutover.CopyOf(tc.kind)
		require.Equal(t, tc.copySrc != "", ok, "CopyOf(%q)", tc.kind)
		require.Equal(t, [2]string{tc.copySrc, tc.copyDst}, [2]string{src, dst}, "CopyOf(%q)", tc.kind)
		src, dst, ok = cutover.StreamOf(tc.kind)
		require.Equal(t, tc.strSrc != "", ok, "StreamOf(%q)", tc.kind)
		require.Equal(t, [2]string{tc.strSrc, tc.strDst}, [2]string{src, dst}, "StreamOf(%q)", tc.kind)
	}
}

// FuzzTaskKinds: CopyOf and StreamOf never panic, and what they accept names two databases
// without spaces that rebuild the type they read.
func FuzzTaskKinds(f *testing.F) {
	for _, k := range []string{"reshard app -> app__reshard_4", "replication app -> app__reshard_4 (reverse)",
		"replication app -> app__reshard_4", "reshard a -> b -> c", "replication  (reverse)", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, kind string) {
		if src, dst, ok := cutover.CopyOf(kind); ok {
			require.NotContains(t, src+dst, " ")
			require.Equal(t, kind, "reshard "+src+" -> "+dst)
		}
		if src, dst, ok := cutover.StreamOf(kind); ok {
			require.NotContains(t, src+dst, " ")
			require.Contains(t, []string{"replication " + src + " -> " + dst, "replication " + src + " -> " + dst + " (reverse)"}, kind)
		}
	})
}
