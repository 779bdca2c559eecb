package refrouter

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// ErrAdminSyntax: an admin command the server does not parse (PgDog: SQLSTATE 08P01,
// "syntax error in admin command", the connection stays).
var ErrAdminSyntax = errors.New("syntax error in admin command")

// AdminCommand is one parsed admin command.
type AdminCommand struct {
	// Verb is reload, pause, resume, show, copy_data, cutover or stop_task.
	Verb string
	// Args are the words after the verb (for show: the thing shown).
	Args []string
}

// ParseAdmin parses one admin command as PgDog does: semicolons stripped, the whole text
// lowercased, words split on single spaces. It accepts the commands the PgDog adapter
// sends a cutover's instances: RELOAD; PAUSE and RESUME [[user] db]; MAINTENANCE ON|OFF
// [db]; SHOW POOLS, VERSION,
// TASKS, PEERS, REPLICATION_SLOTS, CONFIG; COPY_DATA <src> <dst> <publication> [slot];
// CUTOVER [task]; STOP_TASK <task>. Anything else matches ErrAdminSyntax.
func ParseAdmin(raw string) (AdminCommand, error) {
	cmd := strings.ToLower(strings.TrimSpace(strings.ReplaceAll(raw, ";", "")))
	w := strings.Split(cmd, " ")
	bad := func() (AdminCommand, error) { return AdminCommand{}, fmt.Errorf("%w: %q", ErrAdminSyntax, raw) }
	if slices.Contains(w, "") {
		return bad()
	}
	c := AdminCommand{Verb: w[0], Args: w[1:]}
	switch n := len(c.Args); c.Verb {
	case "reload":
		if n != 0 {
			return bad()
		}
	case "pause", "resume":
		if n > 2 {
			return bad()
		}
	case "maintenance":
		if n < 1 || n > 2 || c.Args[0] != "on" && c.Args[0] != "off" {
			return bad()
		}
	case "show":
		if n != 1 || !slices.Contains([]string{"pools", "version", "tasks", "peers", "replication_slots", "config"}, c.Args[0]) {
			return bad()
		}
	case "copy_data":
		if n != 3 && n != 4 {
			return bad()
		}
	case "cutover":
		if n > 1 || (n == 1 && !isTaskID(c.Args[0])) {
			return bad()
		}
	case "stop_task":
		if n != 1 || !isTaskID(c.Args[0]) {
			return bad()
		}
	default:
		return bad()
	}
	return c, nil
}

func isTaskID(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// table is one admin reply: columns, text rows (nil for NULL), the CommandComplete tag.
type table struct {
	cols []string
	rows [][]*string
	tag  string
}

func cell(s string) *string { return &s }

func boolCell(b bool) *string {
	if b {
		return cell("t")
	}
	return cell("f")
}

// adminQuery answers one admin Query message; false once the connection must close.
func (s *Server) adminQuery(b *pgproto3.Backend, raw string) bool {
	c, err := ParseAdmin(raw)
	if err != nil {
		b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "08P01", Message: ErrAdminSyntax.Error()})
		b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return b.Flush() == nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.CommandTimeout)
	defer cancel()
	t, err := s.run(ctx, c)
	if err != nil {
		// PgDog: a command that fails while running ends the admin connection (FATAL 58000).
		s.opts.Logger.Warn("admin command failed", "command", raw, "err", err)
		b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "58000", Message: err.Error()})
		_ = b.Flush()
		return false
	}
	sendTable(b, t)
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return b.Flush() == nil
}

func sendTable(b *pgproto3.Backend, t table) {
	if t.cols != nil {
		fds := make([]pgproto3.FieldDescription, len(t.cols))
		for i, c := range t.cols {
			fds[i] = pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: 25, DataTypeSize: -1, TypeModifier: -1}
		}
		b.Send(&pgproto3.RowDescription{Fields: fds})
		for _, row := range t.rows {
			vals := make([][]byte, len(row))
			for i, v := range row {
				if v != nil {
					vals[i] = []byte(*v)
				}
			}
			b.Send(&pgproto3.DataRow{Values: vals})
		}
	}
	b.Send(&pgproto3.CommandComplete{CommandTag: []byte(t.tag)})
}

// run executes a parsed admin command on the router.
func (s *Server) run(ctx context.Context, c AdminCommand) (table, error) {
	r := s.opts.Router
	arg := func(i int) string {
		if i >= 0 && i < len(c.Args) {
			return c.Args[i]
		}
		return ""
	}
	switch c.Verb {
	case "reload":
		return table{tag: "RELOAD"}, r.Reload(ctx)
	// The reference router serves one user (RouterOptions.User) and routes a held statement
	// when it is released, so PgDog's two holds are one here: PAUSE <user> <db> pauses the
	// database as PAUSE <db> does, and MAINTENANCE ON|OFF [db] holds and releases like PAUSE
	// and RESUME (the PgDog adapter's Pause sends MAINTENANCE ON, then PAUSE; its Resume
	// RESUME, then MAINTENANCE OFF, so a held statement is released at the RESUME).
	case "pause":
		return table{tag: "PAUSE"}, r.Pause(ctx, arg(len(c.Args)-1))
	case "resume":
		return table{tag: "RESUME"}, r.Resume(ctx, arg(len(c.Args)-1))
	case "maintenance":
		tag := strings.TrimSpace("MAINTENANCE " + strings.ToUpper(c.Args[0]) + " " + arg(1)) // as PgDog 9918e963 tags it
		if c.Args[0] == "on" {
			return table{tag: tag}, r.Pause(ctx, arg(1))
		}
		return table{tag: tag}, r.Resume(ctx, arg(1))
	case "show":
		switch c.Args[0] {
		case "pools":
			return s.showPools(), nil
		case "version":
			return table{cols: []string{"version"}, rows: [][]*string{{cell("PgDog v0.0.0 [" + Version + "]")}}, tag: "SHOW"}, nil
		case "peers":
			return table{cols: []string{"addr", "last_seen", "clients"}, tag: "SHOW"}, nil
		case "config":
			return table{cols: []string{"name", "value"}, tag: "SHOW"}, nil
		case "tasks":
			return s.showTasks(ctx)
		case "replication_slots":
			return s.showSlots(ctx)
		}
	case "copy_data":
		return s.copyData(ctx, arg(0), arg(1), arg(2), arg(3))
	case "cutover":
		return s.cutover(ctx, arg(0))
	case "stop_task":
		id, _ := strconv.ParseInt(arg(0), 10, 64)
		rs := s.resharder()
		v := "task not found"
		if rs != nil && rs.running(id) {
			if err := rs.StopTask(ctx, id); err != nil {
				return table{}, err
			}
			v = "OK"
		}
		return table{cols: []string{"stop_task"}, rows: [][]*string{{cell(v)}}, tag: "STOP_TASK"}, nil
	}
	return table{}, fmt.Errorf("%w: %s", ErrAdminSyntax, c.Verb)
}

// showPools lists one row per (database, user, shard) of the loaded files, the marker
// pools included, as PgDog's SHOW POOLS: how the PgDog adapter reads the generation.
func (s *Server) showPools() table {
	r := s.opts.Router
	r.mu.Lock()
	defer r.mu.Unlock()
	t := table{cols: []string{"id", "database", "user", "addr", "port", "shard", "role", "cl_waiting", "pool_mode", "paused", "banned", "healthy", "online", "schema_admin"}, tag: "SHOW"}
	id := 0
	for _, name := range r.topo.Names() {
		d := r.topo.Databases[name]
		users := slices.Sorted(maps.Keys(d.Users))
		if base, g, ok := render.ParseGenerationDatabase(name); ok && slices.Contains(r.topo.markers[base], g) {
			users = append(users, render.GenerationUser)
		}
		paused := r.gates[name] != nil || r.gates[""] != nil
		waiting := 0
		if name == r.opts.Database {
			waiting = r.held
		}
		for _, u := range users {
			for shard, be := range d.Shards {
				if be == nil {
					continue
				}
				id++
				t.rows = append(t.rows, []*string{cell(strconv.Itoa(id)), cell(name), cell(u), cell(be.Host), cell(strconv.Itoa(int(be.Port))),
					cell(strconv.Itoa(shard)), cell("primary"), cell(strconv.Itoa(waiting)), cell("transaction"), boolCell(paused),
					boolCell(false), boolCell(true), boolCell(true), boolCell(false)})
			}
		}
	}
	return t
}

func (s *Server) resharder() *Resharder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rs
}

func (s *Server) showTasks(ctx context.Context) (table, error) {
	t := table{cols: []string{"id", "scope", "type", "status", "inner_status", "started_at", "updated_at", "elapsed", "elapsed_ms"}, tag: "SHOW"}
	rs := s.resharder()
	if rs == nil {
		return t, nil
	}
	tasks, err := rs.Tasks(ctx)
	if err != nil {
		return t, err
	}
	t.rows = taskRows(tasks, time.Now())
	return t, nil
}

// taskRows are the rows of SHOW TASKS listing tasks as of now, in PgDog's shape: each root
// row, followed for a copy by the subtask row of its replication.
func taskRows(tasks []adapters.Task, now time.Time) [][]*string {
	var rows [][]*string
	for _, k := range tasks {
		start := now.Add(-k.Elapsed).UTC().Format(time.RFC3339)
		rows = append(rows, []*string{cell(strconv.FormatInt(k.ID, 10)), cell("root"), cell(k.Kind), cell(k.Status), cell(k.InnerStatus),
			cell(start), cell(start), cell(k.Elapsed.String()), cell(strconv.FormatInt(k.Elapsed.Milliseconds(), 10))})
		// PgDog lists a copy's stages as subtask rows after its root row, and a CUTOVER is
		// accepted only once the "replication" one runs (adapters/pgdog RootTasks reads a
		// root that says "replicating" without it as still setting up). The stand-in's
		// copy streams as soon as it replicates, so it lists that row from then on.
		if pair, ok := strings.CutPrefix(k.Kind, "reshard "); ok && (k.InnerStatus == "replicating" || k.Status == "finished") {
			status := "finished"
			if k.Status == "running" {
				status = "running"
			}
			rows = append(rows, []*string{nil, cell("subtask"), cell("replication " + pair), cell(status), cell("replicating"),
				cell(start), cell(start), cell(k.Elapsed.String()), cell(strconv.FormatInt(k.Elapsed.Milliseconds(), 10))})
		}
	}
	return rows
}

// showSlots lists, as PgDog does, one row per source shard of each task of the resharding
// stand-in, named <slot>_<shard> (its streams are one slot per pair of shards; lag_bytes is
// the worst of the shard's, NULL when one is missing).
func (s *Server) showSlots(ctx context.Context) (table, error) {
	t := table{cols: []string{"host", "port", "database_name", "name", "lsn", "lag", "lag_bytes", "copy_data", "last_transaction", "last_transaction_ms"}, tag: "SHOW"}
	rs := s.resharder()
	if rs == nil {
		return t, nil
	}
	for _, slot := range rs.slotNames() {
		lags, err := rs.shardLags(ctx, slot)
		if err != nil {
			return t, err
		}
		for i, lag := range lags {
			var lagCell *string
			if lag != nil {
				lagCell = cell(strconv.FormatInt(*lag, 10))
			}
			t.rows = append(t.rows, []*string{nil, nil, nil, cell(slot + "_" + strconv.Itoa(i)), nil, nil, lagCell, nil, nil, nil})
		}
	}
	return t, nil
}

// copyData starts the resharding stand-in on the loaded files' source and destination
// databases (once per process: a retry of the same slot finds its task).
func (s *Server) copyData(ctx context.Context, src, dst, pub, slot string) (table, error) {
	if s.opts.ReshardDSN == nil {
		return table{}, errors.New("refrouter: COPY_DATA needs the resharding login (the server was started without one)")
	}
	if slot == "" {
		var b [19]byte
		_, _ = rand.Read(b[:])
		for i := range b {
			b[i] = 'a' + b[i]%26
		}
		slot = "__pgdog_repl_" + string(b[:])
	}
	s.mu.Lock()
	rs := s.rs
	s.mu.Unlock()
	if rs == nil {
		var err error
		if rs, err = s.opts.Router.resharderFor(src, dst, s.opts.ReshardDSN); err != nil {
			return table{}, err
		}
		s.mu.Lock()
		if s.rs == nil {
			s.rs = rs
		}
		rs = s.rs
		s.mu.Unlock()
	}
	id, err := rs.CopyData(ctx, src, dst, pub, slot)
	if err != nil {
		return table{}, err
	}
	return table{cols: []string{"task_id", "replication_slot"}, rows: [][]*string{{cell(strconv.FormatInt(id, 10)), cell(slot)}}, tag: "COPY_DATA"}, nil
}

func (s *Server) cutover(ctx context.Context, task string) (table, error) {
	rs := s.resharder()
	if rs == nil {
		return table{}, errors.New("task is not a replication task")
	}
	id, err := strconv.ParseInt(task, 10, 64)
	if task == "" {
		id, err = rs.waiting(), nil
	}
	if err != nil {
		return table{}, err
	}
	if err := rs.Cutover(ctx, id); err != nil {
		return table{}, err
	}
	return table{cols: []string{"cutover"}, rows: [][]*string{{cell("OK")}}, tag: "CUTOVER"}, nil
}

// resharderFor makes the resharding stand-in for the loaded databases src (the source
// layout) and dst (the destination), as PgDog's COPY_DATA reads both from its config.
func (r *Router) resharderFor(src, dst string, dsn func(shardmap.Backend) string) (*Resharder, error) {
	r.mu.Lock()
	sd, dd := r.topo.Databases[src], r.topo.Databases[dst]
	r.mu.Unlock()
	if sd == nil || dd == nil || src != r.opts.Database {
		return nil, fmt.Errorf("refrouter: COPY_DATA %s %s: the source must be %q and both must be loaded", src, dst, r.opts.Database)
	}
	layout := func(d *Database) (shardmap.Layout, error) {
		h, ok := d.Scheme.(shardmap.PgHash)
		if !ok {
			return shardmap.Layout{}, fmt.Errorf("refrouter: COPY_DATA: %q is not hash-sharded (the stand-in filters rows with hash partitioning)", d.Name)
		}
		h.Key.Tables = d.Tables
		l := shardmap.Layout{Scheme: h}
		for i, b := range d.Shards {
			if b == nil {
				return shardmap.Layout{}, fmt.Errorf("refrouter: COPY_DATA: shard %d of %q has no primary", i, d.Name)
			}
			l.Shards = append(l.Shards, shardmap.Shard{Name: fmt.Sprintf("s%d", i), Backend: shardmap.Backend{Host: b.Host, Port: b.Port, Database: b.Database}})
		}
		return l, nil
	}
	from, err := layout(sd)
	if err != nil {
		return nil, err
	}
	to, err := layout(dd)
	if err != nil {
		return nil, err
	}
	rec := &shardmap.Record{Router: shardmap.Router{Kind: shardmap.PgDog, Name: src}, Layout: from, Target: &to}
	return NewResharder(r, rec, dsn)
}

// running reports whether task id is running.
func (rs *Resharder) running(id int64) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, t := range rs.tasks {
		if t.id == id && t.status == "running" {
			return true
		}
	}
	return false
}

// waiting is the lowest id of a running copy task (PgDog's CUTOVER without an id), 0 if none.
func (rs *Resharder) waiting() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, t := range rs.tasks {
		if t.kind == "copy_data" && t.status == "running" {
			return t.id
		}
	}
	return 0
}

func (rs *Resharder) slotNames() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []string
	for _, t := range rs.tasks {
		out = append(out, t.slot)
	}
	return out
}

// clientQuery runs one client statement on the shard its comment names, relaying the
// shard's rows, tag or error; false once the connection must close.
func (s *Server) clientQuery(b *pgproto3.Backend, sql string) bool {
	key, err := ParseShardingKey(sql)
	if err != nil {
		b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: err.Error()})
		b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		return b.Flush() == nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.CommandTimeout)
	defer cancel()
	res, err := s.opts.Router.Query(ctx, key, func(rows pgx.Rows) error {
		fds := rows.FieldDescriptions()
		if len(fds) > 0 {
			out := make([]pgproto3.FieldDescription, len(fds))
			for i, f := range fds {
				out[i] = pgproto3.FieldDescription{Name: []byte(f.Name), TableOID: f.TableOID, TableAttributeNumber: f.TableAttributeNumber,
					DataTypeOID: f.DataTypeOID, DataTypeSize: f.DataTypeSize, TypeModifier: f.TypeModifier, Format: f.Format}
			}
			b.Send(&pgproto3.RowDescription{Fields: out})
		}
		for rows.Next() {
			raw := rows.RawValues()
			vals := make([][]byte, len(raw))
			for i, v := range raw {
				if v != nil {
					vals[i] = append([]byte{}, v...)
				}
			}
			b.Send(&pgproto3.DataRow{Values: vals})
		}
		return rows.Err()
	}, sql, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		b.Send(clientError(err))
	} else {
		b.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.Tag.String())})
	}
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return b.Flush() == nil
}

// clientError is what a client is told of a failed statement: the shard's SQLSTATE when
// the shard answered (a fence's 28000 or 57P01 among them), else a code of the router's.
func clientError(err error) *pgproto3.ErrorResponse {
	var be *adapters.BackendError
	switch {
	case errors.As(err, &be) && be.Code != "":
		return &pgproto3.ErrorResponse{Severity: "ERROR", Code: be.Code, Message: err.Error()}
	case errors.Is(err, ErrNoRoute):
		return &pgproto3.ErrorResponse{Severity: "ERROR", Code: "0A000", Message: err.Error()}
	default:
		return &pgproto3.ErrorResponse{Severity: "ERROR", Code: "08006", Message: err.Error()}
	}
}
