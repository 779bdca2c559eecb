package pgdog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
)

// Reply is one admin command's answer: column names, rows of text cells (nil for NULL)
// and the CommandComplete tag. The admin database speaks the simple query protocol, so
// every cell is text.
type Reply struct {
	Columns []string
	Rows    [][][]byte
	Tag     string
}

// table reads a Reply by column name, so that columns pgdog.md does not list, or a
// different column order, do not break decoding. Its first error sticks.
type table struct {
	what string
	r    Reply
	idx  map[string]int
	err  error
}

func newTable(what string, r Reply) *table {
	t := &table{what: what, r: r, idx: map[string]int{}}
	for i, c := range r.Columns {
		if _, dup := t.idx[c]; !dup {
			t.idx[c] = i
		}
	}
	return t
}

func (t *table) fail(format string, a ...any) {
	if t.err == nil {
		t.err = fmt.Errorf("%w: %s: %s", ErrReply, t.what, fmt.Sprintf(format, a...))
	}
}

// require fails unless every named column is present.
func (t *table) require(cols ...string) {
	for _, c := range cols {
		if _, ok := t.idx[c]; !ok {
			t.fail("no column %q (columns: %s)", c, strings.Join(t.r.Columns, ", "))
		}
	}
}

// cell returns row i's cell of col; ok is false when the column is absent or the cell NULL.
func (t *table) cell(i int, col string) (string, bool) {
	j, ok := t.idx[col]
	if !ok || j >= len(t.r.Rows[i]) || t.r.Rows[i][j] == nil {
		return "", false
	}
	return string(t.r.Rows[i][j]), true
}

func (t *table) text(i int, col string) string {
	s, _ := t.cell(i, col)
	return s
}

// int reads an integer cell; NULL and an absent column read as 0 with ok false.
func (t *table) int(i int, col string, bits int) (int64, bool) {
	s, ok := t.cell(i, col)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		t.fail("row %d: %s = %q is not an integer of %d bits", i, col, s, bits)
		return 0, false
	}
	return v, true
}

// bool reads a boolean cell. pgdog.md names the columns, not their spelling; the adapter
// accepts Postgres's text forms of a boolean.
func (t *table) bool(i int, col string) bool {
	s, ok := t.cell(i, col)
	if !ok {
		return false
	}
	switch strings.ToLower(s) {
	case "t", "true", "on", "yes", "1":
		return true
	case "f", "false", "off", "no", "0":
		return false
	}
	t.fail("row %d: %s = %q is not a boolean", i, col, s)
	return false
}

// Pool is one SHOW POOLS row: one pool per (user, database, server) of the loaded config.
// It is the one place PgDog shows which databases, shards and servers it loaded.
type Pool struct {
	ID             int64
	Database, User string
	Addr           string
	Port           uint16
	Shard          uint32
	Role           string
	ClientsWaiting int64 // cl_waiting
	ServersIdle    int64 // sv_idle
	ServersActive  int64 // sv_active
	ServersTotal   int64 // sv_total
	PoolMode       string
	Paused         bool
	Banned         bool
	Healthy        bool
	Online         bool
	SchemaAdmin    bool
}

// Row is the part of the row the rendered files decide, as kernel/render compares it.
func (p Pool) Row() render.PoolRow {
	return render.PoolRow{Database: p.Database, User: p.User, Addr: p.Addr, Port: p.Port, Shard: p.Shard, Role: p.Role}
}

// DecodePools decodes a SHOW POOLS reply. Columns the adapter relies on (database, user,
// addr, port, shard, role, paused) must be present; the others are read when present.
func DecodePools(r Reply) ([]Pool, error) {
	t := newTable("SHOW POOLS", r)
	t.require("database", "user", "addr", "port", "shard", "role", "paused")
	var out []Pool
	for i := range r.Rows {
		if t.err != nil {
			break
		}
		p := Pool{Database: t.text(i, "database"), User: t.text(i, "user"), Addr: t.text(i, "addr"),
			Role: t.text(i, "role"), PoolMode: t.text(i, "pool_mode")}
		p.ID, _ = t.int(i, "id", 64)
		port, _ := t.int(i, "port", 17)
		shard, _ := t.int(i, "shard", 33)
		if port < 0 || port > 65535 || shard < 0 || shard > 1<<32-1 {
			t.fail("row %d: port %d or shard %d out of range", i, port, shard)
		}
		p.Port, p.Shard = uint16(port), uint32(shard)
		p.ClientsWaiting, _ = t.int(i, "cl_waiting", 64)
		p.ServersIdle, _ = t.int(i, "sv_idle", 64)
		p.ServersActive, _ = t.int(i, "sv_active", 64)
		p.ServersTotal, _ = t.int(i, "sv_total", 64)
		p.Paused, p.Banned, p.Healthy = t.bool(i, "paused"), t.bool(i, "banned"), t.bool(i, "healthy")
		p.Online, p.SchemaAdmin = t.bool(i, "online"), t.bool(i, "schema_admin")
		out = append(out, p)
	}
	return out, t.err
}

// Setting is one SHOW CONFIG row. PgDog lists [general] keys unprefixed, [tcp] keys as
// tcp_*, [memory] keys as memory_*; durations in human form, unset values as "default".
type Setting struct{ Name, Value string }

// Settings is a SHOW CONFIG reply.
type Settings []Setting

// Get returns the value of a setting.
func (s Settings) Get(name string) (string, bool) {
	for _, x := range s {
		if x.Name == name {
			return x.Value, true
		}
	}
	return "", false
}

// DecodeSettings decodes a SHOW CONFIG reply (columns name, value).
func DecodeSettings(r Reply) (Settings, error) {
	t := newTable("SHOW CONFIG", r)
	t.require("name", "value")
	var out Settings
	for i := range r.Rows {
		if t.err != nil {
			break
		}
		out = append(out, Setting{Name: t.text(i, "name"), Value: t.text(i, "value")})
	}
	return out, t.err
}

// TaskRow is one SHOW TASKS row. Root rows carry the id that CUTOVER and STOP_TASK take;
// subtask rows have a NULL id (Root false, ID 0).
type TaskRow struct {
	ID          int64
	Root        bool   // scope = "root"
	Type        string // PgDog's description, e.g. "reshard app -> app__reshard_4" (COPY_DATA too)
	Status      string // started, running, finished, cancelling, cancelled, "failed: <msg>", "panicked: <msg>"
	InnerStatus string // syncing schema, syncing data, finalizing schema, replicating, cutting over, rolling back, stopping
	StartedAt   string
	UpdatedAt   string
	Elapsed     time.Duration // from elapsed_ms
}

// Task returns the row as the RouterInstance seam reports tasks.
func (r TaskRow) Task() adapters.Task {
	return adapters.Task{ID: r.ID, Kind: r.Type, Status: r.Status, InnerStatus: r.InnerStatus, Elapsed: r.Elapsed}
}

// DecodeTasks decodes a SHOW TASKS reply.
func DecodeTasks(r Reply) ([]TaskRow, error) {
	t := newTable("SHOW TASKS", r)
	t.require("id", "scope", "type", "status", "inner_status")
	var out []TaskRow
	for i := range r.Rows {
		if t.err != nil {
			break
		}
		row := TaskRow{Type: t.text(i, "type"), Status: t.text(i, "status"), InnerStatus: t.text(i, "inner_status"),
			StartedAt: t.text(i, "started_at"), UpdatedAt: t.text(i, "updated_at")}
		switch scope := t.text(i, "scope"); scope {
		case "root":
			row.Root = true
			var ok bool
			if row.ID, ok = t.int(i, "id", 64); !ok && t.err == nil {
				t.fail("row %d: a root task without an id", i)
			}
		case "subtask":
		default:
			t.fail("row %d: scope %q (want root or subtask)", i, scope)
		}
		if ms, ok := t.cell(i, "elapsed_ms"); ok {
			f, err := strconv.ParseFloat(ms, 64)
			if err != nil || f < 0 || f > float64(1<<53) {
				t.fail("row %d: elapsed_ms = %q is not a duration in milliseconds", i, ms)
			}
			row.Elapsed = time.Duration(f * float64(time.Millisecond))
		}
		out = append(out, row)
	}
	return out, t.err
}

// ReplicationSlot is one SHOW REPLICATION_SLOTS row: a resharding slot this instance owns.
type ReplicationSlot struct {
	Host         string
	Port         uint16
	DatabaseName string
	Name         string
	LSN          string
	Lag          string // human form
	LagBytes     int64
	LagKnown     bool // false when lag_bytes is NULL
	CopyData     string
	// LastTransaction is how long ago the last replicated transaction was, human form.
	LastTransaction   string
	LastTransactionMs int64
}

// DecodeReplicationSlots decodes a SHOW REPLICATION_SLOTS reply.
func DecodeReplicationSlots(r Reply) ([]ReplicationSlot, error) {
	t := newTable("SHOW REPLICATION_SLOTS", r)
	t.require("name", "lag_bytes")
	var out []ReplicationSlot
	for i := range r.Rows {
		if t.err != nil {
			break
		}
		s := ReplicationSlot{Host: t.text(i, "host"), DatabaseName: t.text(i, "database_name"), Name: t.text(i, "name"),
			LSN: t.text(i, "lsn"), Lag: t.text(i, "lag"), CopyData: t.text(i, "copy_data"), LastTransaction: t.text(i, "last_transaction")}
		port, _ := t.int(i, "port", 17)
		if port < 0 || port > 65535 {
			t.fail("row %d: port %d out of range", i, port)
		}
		s.Port = uint16(port)
		s.LagBytes, s.LagKnown = t.int(i, "lag_bytes", 64)
		s.LastTransactionMs, _ = t.int(i, "last_transaction_ms", 64)
		out = append(out, s)
	}
	return out, t.err
}

// oneValue reads the single cell of a one-column, one-row reply (CUTOVER, STOP_TASK,
// SHOW VERSION, ...).
func oneValue(what string, r Reply, col string) (string, error) {
	t := newTable(what, r)
	t.require(col)
	if t.err == nil && len(r.Rows) != 1 {
		t.fail("%d rows, want 1", len(r.Rows))
	}
	if t.err != nil {
		return "", t.err
	}
	v, ok := t.cell(0, col)
	if !ok {
		t.fail("%s is NULL", col)
	}
	return v, t.err
}

// taskID reads a task_id cell: text holding the id, as RESHARD and COPY_DATA reply.
func taskID(what string, r Reply) (int64, error) {
	s, err := oneValue(what, r, "task_id")
	if err != nil {
		return 0, err
	}
	id, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return 0, fmt.Errorf("%w: %s: task_id %q is not an integer", ErrReply, what, s)
	}
	return id, nil
}
