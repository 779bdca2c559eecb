package pgdog_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/kernel/render"
)

func cells(vals ...string) [][]byte {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if v != "NULL" {
			out[i] = []byte(v)
		}
	}
	return out
}

func TestDecodePools(t *testing.T) {
	r := pgdog.Reply{Columns: []string{"id", "database", "user", "addr", "port", "shard", "role", "cl_waiting", "paused", "healthy", "extra"},
		Rows: [][][]byte{
			cells("3", "app", "app", "10.0.0.1", "5432", "1", "primary", "2", "t", "true", "x"),
			cells("4", "app__generation_7", "__loam_generation", "10.0.0.1", "5432", "0", "primary", "0", "f", "false", "NULL"),
		}}
	pools, err := pgdog.DecodePools(r)
	require.NoError(t, err)
	require.Equal(t, pgdog.Pool{ID: 3, Database: "app", User: "app", Addr: "10.0.0.1", Port: 5432, Shard: 1, Role: "primary",
		ClientsWaiting: 2, Paused: true, Healthy: true}, pools[0])
	require.False(t, pools[1].Paused)
	g, known, err := render.GenerationFromPools("app", []render.PoolRow{pools[0].Row(), pools[1].Row()})
	require.NoError(t, err)
	require.True(t, known)
	require.Equal(t, uint64(7), g)

	for name, bad := range map[string]pgdog.Reply{
		"missing column": {Columns: []string{"database", "user"}, Rows: [][][]byte{cells("app", "app")}},
		"bad port":       {Columns: r.Columns, Rows: [][][]byte{cells("3", "app", "app", "h", "99999", "1", "primary", "0", "t", "t", "")}},
		"bad bool":       {Columns: r.Columns, Rows: [][][]byte{cells("3", "app", "app", "h", "5432", "1", "primary", "0", "maybe", "t", "")}},
		"bad shard":      {Columns: r.Columns, Rows: [][][]byte{cells("3", "app", "app", "h", "5432", "-1", "primary", "0", "t", "t", "")}},
	} {
		_, err := pgdog.DecodePools(bad)
		require.ErrorIs(t, err, pgdog.ErrReply, name)
	}
}

func TestDecodeTasks(t *testing.T) {
	cols := []string{"id", "scope", "type", "status", "inner_status", "started_at", "updated_at", "elapsed", "elapsed_ms"}
	tasks, err := pgdog.DecodeTasks(pgdog.Reply{Columns: cols, Rows: [][][]byte{
		cells("12", "root", "copy_data", "running", "replicating", "a", "b", "1.5s", "1500.25"),
		cells("NULL", "subtask", "table_copy", "running", "", "a", "b", "1s", "1000"),
		cells("13", "root", "replication", "failed: boom", "", "a", "b", "NULL", "NULL"),
	}})
	require.NoError(t, err)
	require.Equal(t, pgdog.TaskRow{ID: 12, Root: true, Type: "copy_data", Status: "running", InnerStatus: "replicating",
		StartedAt: "a", UpdatedAt: "b", Elapsed: 1500*time.Millisecond + 250*time.Microsecond}, tasks[0])
	require.False(t, tasks[1].Root)
	require.Zero(t, tasks[1].ID)
	require.Equal(t, "failed: boom", tasks[2].Task().Status)

	for name, rows := range map[string][][]byte{
		"root without id": cells("NULL", "root", "x", "running", "", "", "", "", "0"),
		"unknown scope":   cells("1", "branch", "x", "running", "", "", "", "", "0"),
		"bad elapsed":     cells("1", "root", "x", "running", "", "", "", "", "soon"),
		"bad id":          cells("one", "root", "x", "running", "", "", "", "", "0"),
	} {
		_, err := pgdog.DecodeTasks(pgdog.Reply{Columns: cols, Rows: [][][]byte{rows}})
		require.ErrorIs(t, err, pgdog.ErrReply, name)
	}
}

func TestDecodeReplicationSlots(t *testing.T) {
	cols := []string{"host", "port", "database_name", "name", "lsn", "lag", "lag_bytes", "copy_data", "last_transaction", "last_transaction_ms"}
	slots, err := pgdog.DecodeReplicationSlots(pgdog.Reply{Columns: cols, Rows: [][][]byte{
		cells("10.0.0.1", "5432", "app", "loam_app_4", "0/16B3748", "4 kB", "4096", "t", "1s", "1000"),
		cells("10.0.0.2", "5432", "app", "other", "0/0", "NULL", "NULL", "f", "NULL", "NULL"),
	}})
	require.NoError(t, err)
	require.Equal(t, int64(4096), slots[0].LagBytes)
	require.True(t, slots[0].LagKnown)
	require.False(t, slots[1].LagKnown)
	_, err = pgdog.DecodeReplicationSlots(pgdog.Reply{Columns: []string{"name"}})
	require.ErrorIs(t, err, pgdog.ErrReply)
}

// FuzzDecodeReplies: any cells give typed rows or ErrReply, never a panic, for every
// decoder; a decoded pool's port and shard are what the cells say.
func FuzzDecodeReplies(f *testing.F) {
	f.Add("id,database,user,addr,port,shard,role,paused", "1|app|app|h|5432|0|primary|t")
	f.Add("id,scope,type,status,inner_status,elapsed_ms", "NULL|subtask|x|running||1.5")
	f.Add("name,lag_bytes,port", "s|NULL|5432")
	f.Fuzz(func(t *testing.T, cols, row string) {
		r := pgdog.Reply{Columns: strings.Split(cols, ",")}
		r.Rows = [][][]byte{cells(strings.Split(row, "|")...)}
		if pools, err := pgdog.DecodePools(r); err != nil {
			require.ErrorIs(t, err, pgdog.ErrReply)
		} else {
			require.Len(t, pools, 1)
		}
		if _, err := pgdog.DecodeTasks(r); err != nil {
			require.ErrorIs(t, err, pgdog.ErrReply)
		}
		if _, err := pgdog.DecodeReplicationSlots(r); err != nil {
			require.ErrorIs(t, err, pgdog.ErrReply)
		}
		if _, err := pgdog.DecodeSettings(r); err != nil {
			require.ErrorIs(t, err, pgdog.ErrReply)
		}
	})
}

// TestCheckName: an accepted name reaches PgDog unchanged by its lowercasing and its
// argument splitting; the names the renderer and the cutover produce are accepted.
func TestCheckName(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		name := rapid.String().Draw(t, "name")
		if pgdog.CheckName("database", name) != nil {
			return
		}
		require.Equal(t, strings.ToLower(name), name)
		require.Equal(t, []string{name}, strings.Split(strings.ReplaceAll(name, ";", ""), " "))
		require.Equal(t, strings.TrimSpace(name), name)
	})
	for _, ok := range []string{"app", render.ReshardDatabase("app", 12), render.GenerationDatabase("app", 3), "loam_app_4", "__pgdog_repl_abc", "a-b.c$1"} {
		require.NoError(t, pgdog.CheckName("name", ok), ok)
	}
	for _, bad := range []string{"", "App", "a b", "a;b", "a\tb", "ä", `a"b`, strings.Repeat("a", 64)} {
		err := pgdog.CheckName("name", bad)
		require.ErrorIs(t, err, pgdog.ErrName, "%q", bad)
	}
}

// FuzzCheckName: CheckName never accepts what PgDog's lowercasing or splitting would change.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"app", "App", "a b", "İ", "a;"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if pgdog.CheckName("x", name) == nil {
			require.Equal(t, strings.ToLower(name), name)
			require.NotContains(t, name, " ")
			require.NotContains(t, name, ";")
		}
	})
}

// TestTaskSlotLag: PgDog names a COPY_DATA's slots <slot>_<shard>, one per source shard
// (recorded with two source shards: loam_slot_4_0, loam_slot_4_1); the task's lag is the
// largest, known only when every source shard's slot is listed with a known lag.
func TestTaskSlotLag(t *testing.T) {
	slot := func(name string, lag int64, known bool) pgdog.ReplicationSlot {
		return pgdog.ReplicationSlot{Name: name, LagBytes: lag, LagKnown: known}
	}
	slots := []pgdog.ReplicationSlot{slot("loam_app_2_0", 100, true), slot("loam_app_2_1", 4096, true),
		slot("loam_app_2_x", 1<<40, true), slot("loam_app_21_0", 1<<40, true), slot("loam_app_2_", 1<<40, true),
		slot("loam_app_2", 1<<40, true), slot("__pgdog_repl_abc_0", 1<<40, true)}
	lag, ok := pgdog.TaskSlotLag(slots, "loam_app_2", 2)
	require.True(t, ok)
	require.Equal(t, int64(4096), lag, "the largest of the task's shard slots, and only theirs")

	_, ok = pgdog.TaskSlotLag(slots, "loam_app_3", 2)
	require.False(t, ok, "no slot of the task listed")
	_, ok = pgdog.TaskSlotLag(slots, "loam_app_2", 3)
	require.False(t, ok, "source shard 2's slot is not listed: its stream may never have started")
	_, ok = pgdog.TaskSlotLag(slots[1:], "loam_app_2", 2)
	require.False(t, ok, "source shard 0's slot is not listed, however small the others' lag")
	_, ok = pgdog.TaskSlotLag(append(slots, slot("loam_app_2_2", 0, false)), "loam_app_2", 3)
	require.False(t, ok, "one shard's lag unknown")
	_, ok = pgdog.TaskSlotLag(slots, "loam_app_2", 0)
	require.False(t, ok, "no shard, no lag")
}

// TestRootTasks: PgDog reports the cutover's stage on the replication subtask while the
// COPY_DATA task's own row still says replicating; SHOW TASKS lists each root task (newest
// first) followed by its subtasks.
func TestRootTasks(t *testing.T) {
	row := func(id int64, root bool, typ, status, inner string) pgdog.TaskRow {
		return pgdog.TaskRow{ID: id, Root: root, Type: typ, Status: status, InnerStatus: inner}
	}
	tasks := pgdog.RootTasks([]pgdog.TaskRow{
		row(1, true, "replication app__reshard_2 -> app (reverse)", "running", ""),
		row(0, false, "replication app__reshard_2 -> app (reverse)", "running", "replicating"),
		row(0, true, "reshard app -> app__reshard_2", "running", "replicating"),
		row(0, false, "schema_sync(pre) app -> app__reshard_2", "finished", ""),
		row(0, false, "copy_data app -> app__reshard_2", "finished", ""),
		row(0, false, "replication app -> app__reshard_2", "running", "cutting over"),
	})
	require.Len(t, tasks, 2)
	require.Equal(t, int64(1), tasks[0].ID)
	require.Equal(t, "", tasks[0].InnerStatus, "replicating is no stage the root lacks")
	require.Equal(t, int64(0), tasks[1].ID)
	require.Equal(t, "cutting over", tasks[1].InnerStatus, "the subtask's cutover stage")

	done := pgdog.RootTasks([]pgdog.TaskRow{row(0, true, "reshard app -> app__reshard_2", "finished", ""), row(0, false, "replication app -> app__reshard_2", "running", "stopping")})
	require.Equal(t, "", done[0].InnerStatus, "a root that ended keeps its own row")
}

// TestRootTasksNotReplicatingUntilTheStreamRuns: PgDog's COPY_DATA row says replicating
// before its replication subtask exists, when a CUTOVER still fails (seen with 9918e963).
func TestRootTasksNotReplicatingUntilTheStreamRuns(t *testing.T) {
	row := func(root bool, typ, status, inner string) pgdog.TaskRow {
		return pgdog.TaskRow{Root: root, Type: typ, Status: status, InnerStatus: inner}
	}
	early := pgdog.RootTasks([]pgdog.TaskRow{
		row(true, "reshard app -> app__reshard_2", "running", "replicating"),
		row(false, "schema_sync(pre) app -> app__reshard_2", "finished", "syncing tables"),
		row(false, "copy_data app -> app__reshard_2", "finished", ""),
		row(false, "schema_sync(post) app -> app__reshard_2", "finished", "creating indexes"),
	})
	require.Equal(t, "", early[0].InnerStatus, "no stream yet")
	late := pgdog.RootTasks([]pgdog.TaskRow{
		row(true, "reshard app -> app__reshard_2", "running", "replicating"),
		row(false, "replication app -> app__reshard_2", "running", "replicating"),
	})
	require.Equal(t, "replicating", late[0].InnerStatus)
	reverse := pgdog.RootTasks([]pgdog.TaskRow{row(true, "replication app -> app__reshard_2 (reverse)", "running", "replicating")})
	require.Equal(t, "replicating", reverse[0].InnerStatus, "a stream of its own")
}
