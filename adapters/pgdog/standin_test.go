package pgdog_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/pelletier/go-toml/v2"
)

// standIn is a protocol-level STAND-IN for PgDog's admin database, built with pgproto3,
// because PgDog itself cannot be built or run where these tests run. It answers with the
// reply shapes pgdog.md documents and nothing more:
//
//   - simple query protocol only: extended-protocol messages get an ErrorResponse
//     "simple protocol supported only";
//   - one command per Query message, semicolons stripped, the whole command lowercased
//     before parsing, arguments split on single spaces;
//   - CommandComplete tags naming the command (RELOAD, PAUSE, SHOW, MAINTENANCE ON <db>);
//   - a command it cannot parse: a non-fatal ErrorResponse, SQLSTATE 08P01, "syntax error
//     in admin command";
//   - a command that fails while running (RELOAD of a file that does not parse, CUTOVER
//     with nothing to cut over, a migration without a schema owner): a FATAL ErrorResponse,
//     SQLSTATE 58000, and the connection closed (pgdog.md marks this unconfirmed);
//   - RELOAD re-reads pgdog.toml and users.toml from the directory it was started with and
//     keeps the old config if they do not parse;
//   - SHOW POOLS / CONFIG / TASKS / REPLICATION_SLOTS / VERSION / PEERS with the documented
//     columns in the documented order; one pool per (users.toml user, [[databases]] entry of
//     that user's database);
//   - COPY_DATA / RESHARD reply task_id (and replication_slot), CUTOVER replies cutover =
//     OK, STOP_TASK replies stop_task = OK or "task not found".
//
// Where pgdog.md is silent the stand-in makes a choice of its own, and no test relies on it
// being PgDog's: booleans are spelled t/f, task types "copy_data", "reshard" and
// "replication", the extended-protocol rejection carries no SQLSTATE, a failed login is
// FATAL 28P01, task ids start at 1, and lag is whatever a test sets.
type standIn struct {
	ln       net.Listener
	dir      string
	password string

	mu       sync.Mutex
	received []string
	conns    map[net.Conn]bool
	logins   int
	cfg      *siConfig
	maint    map[string]bool
	tasks    []*siTask
	nextTask int64
	wg       sync.WaitGroup
}

type siConfig struct {
	General   map[string]any `toml:"general"`
	Databases []struct {
		Name  string `toml:"name"`
		Host  string `toml:"host"`
		Port  *int64 `toml:"port"`
		Role  string `toml:"role"`
		Shard int64  `toml:"shard"`
	} `toml:"databases"`
	Users []struct {
		Name        string `toml:"name"`
		Database    string `toml:"database"`
		SchemaAdmin bool   `toml:"schema_admin"`
	} `toml:"users"`
	paused map[[2]string]bool // (user, database)
}

type siTask struct {
	id                  int64
	kind, status, inner string
	src, dst, slot      string
	lag                 *int64
}

// newStandIn starts a stand-in on 127.0.0.1 that was "started with" the files in dir.
func newStandIn(dir, password string) (*standIn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &standIn{ln: ln, dir: dir, password: password, conns: map[net.Conn]bool{}, maint: map[string]bool{}, nextTask: 1}
	if err := s.load(); err != nil {
		ln.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// DSN is the admin database's connection string.
func (s *standIn) DSN() string {
	return fmt.Sprintf("postgres://admin:%s@%s/admin?sslmode=disable", s.password, s.ln.Addr())
}

// Close stops listening and drops every connection: the instance is unreachable.
func (s *standIn) Close() {
	s.ln.Close()
	s.DropConnections()
	s.wg.Wait()
}

// DropConnections closes every open admin connection, as a network failure would.
func (s *standIn) DropConnections() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// Received returns every Query message received, as sent.
func (s *standIn) Received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.received)
}

// Logins is how many connections logged in.
func (s *standIn) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// SetTask changes a task's status, as its work progresses.
func (s *standIn) SetTask(id int64, status, inner string, lag *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if t.id == id {
			t.status, t.inner, t.lag = status, inner, lag
		}
	}
}

// Routing returns, per database name, the hosts of its shard entries in the config the
// stand-in runs (its memory: a CUTOVER swaps names there, not in the files).
func (s *standIn) Routing() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, d := range s.cfg.Databases {
		out[d.Name] = append(out[d.Name], d.Host)
	}
	return out
}

func (s *standIn) load() error {
	var c siConfig
	for _, name := range []string{"pgdog.toml", "users.toml"} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // PgDog falls back to its defaults
		}
		if err != nil {
			return err
		}
		if err := toml.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
	}
	c.paused = map[[2]string]bool{}
	if s.cfg != nil {
		// Paused state carries over a RELOAD for pools that still exist.
		for k, v := range s.cfg.paused {
			c.paused[k] = v
		}
	}
	s.cfg = &c
	return nil
}

func (s *standIn) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serve(c)
		}()
	}
}

func (s *standIn) serve(c net.Conn) {
	b := pgproto3.NewBackend(c, c)
	if !s.startup(c, b) {
		return
	}
	for {
		msg, err := b.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Query:
			if !s.query(b, m.String) {
				return
			}
		case *pgproto3.Terminate:
			return
		case *pgproto3.Sync:
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			if b.Flush() != nil {
				return
			}
		case *pgproto3.Parse, *pgproto3.Bind, *pgproto3.Describe, *pgproto3.Execute:
			b.Send(&pgproto3.ErrorResponse{Severity: "ERROR", Message: "simple protocol supported only"})
			if b.Flush() != nil {
				return
			}
		}
	}
}

func (s *standIn) startup(c net.Conn, b *pgproto3.Backend) bool {
	for {
		msg, err := b.ReceiveStartupMessage()
		if err != nil {
			return false
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest, *pgproto3.GSSEncRequest:
			if _, err := c.Write([]byte("N")); err != nil {
				return false
			}
			continue
		case *pgproto3.StartupMessage:
			fatal := func(code, text string) bool {
				b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: code, Message: text})
				b.Flush()
				return false
			}
			if m.Parameters["database"] != "admin" || m.Parameters["user"] != "admin" {
				return fatal("3D000", "the stand-in serves only the admin database as user admin")
			}
			b.Send(&pgproto3.AuthenticationCleartextPassword{})
			if b.Flush() != nil || b.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
				return false
			}
			pm, err := b.Receive()
			if err != nil {
				return false
			}
			if p, ok := pm.(*pgproto3.PasswordMessage); !ok || p.Password != s.password {
				return fatal("28P01", "password authentication failed")
			}
			b.Send(&pgproto3.AuthenticationOk{})
			b.Send(&pgproto3.ParameterStatus{Name: "server_version", Value: "14.0 (PgDog stand-in)"})
			b.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
			b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
			s.mu.Lock()
			s.logins++
			s.mu.Unlock()
			return b.Flush() == nil
		default:
			return false
		}
	}
}

// reply is what one command answers.
type reply struct {
	cols   []string
	rows   [][]*string
	tag    string
	err    *pgproto3.ErrorResponse
	closes bool
}

func syntax() reply {
	return reply{err: &pgproto3.ErrorResponse{Severity: "ERROR", Code: "08P01", Message: "syntax error in admin command"}}
}

func failed(format string, a ...any) reply {
	return reply{err: &pgproto3.ErrorResponse{Severity: "FATAL", Code: "58000", Message: fmt.Sprintf(format, a...)}, closes: true}
}

func str(s string) *string { return &s }

func boolText(b bool) *string {
	if b {
		return str("t")
	}
	return str("f")
}

// query answers one Query message; it returns false once the connection must close.
func (s *standIn) query(b *pgproto3.Backend, raw string) bool {
	s.mu.Lock()
	s.received = append(s.received, raw)
	r := s.run(strings.ToLower(strings.TrimSpace(strings.ReplaceAll(raw, ";", ""))))
	s.mu.Unlock()
	if r.err != nil {
		b.Send(r.err)
		if r.closes {
			b.Flush()
			return false
		}
	} else {
		if r.cols != nil {
			var fds []pgproto3.FieldDescription
			for _, c := range r.cols {
				oid := uint32(25)
				if c == "id" && r.tag == "SHOW" {
					oid = 20
				}
				fds = append(fds, pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: oid, DataTypeSize: -1, TypeModifier: -1})
			}
			b.Send(&pgproto3.RowDescription{Fields: fds})
			for _, row := range r.rows {
				var vals [][]byte
				for _, v := range row {
					if v == nil {
						vals = append(vals, nil)
					} else {
						vals = append(vals, []byte(*v))
					}
				}
				b.Send(&pgproto3.DataRow{Values: vals})
			}
		}
		b.Send(&pgproto3.CommandComplete{CommandTag: []byte(r.tag)})
	}
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return b.Flush() == nil
}

// run parses and executes one lowercased command; s.mu is held.
func (s *standIn) run(cmd string) reply {
	w := strings.Split(cmd, " ")
	switch {
	case cmd == "reload":
		if err := s.load(); err != nil {
			return failed("reload failed, old configuration kept: %v", err)
		}
		return reply{tag: "RELOAD"}
	case (w[0] == "pause" || w[0] == "resume") && len(w) <= 3:
		user, db := "", ""
		switch len(w) {
		case 2:
			db = w[1]
		case 3:
			user, db = w[1], w[2]
		}
		for _, p := range s.pools() {
			if (db == "" || p.db == db) && (user == "" || p.user == user) {
				s.cfg.paused[[2]string{p.user, p.db}] = w[0] == "pause"
			}
		}
		return reply{tag: strings.ToUpper(w[0])}
	case w[0] == "maintenance" && len(w) >= 2 && len(w) <= 3 && (w[1] == "on" || w[1] == "off"):
		db := ""
		if len(w) == 3 {
			db = w[2]
		}
		switch {
		case w[1] == "off" && db == "":
			s.maint = map[string]bool{}
		case w[1] == "on":
			s.maint[db] = true
		default:
			delete(s.maint, db)
		}
		tag := "MAINTENANCE " + strings.ToUpper(w[1])
		if db != "" {
			tag += " " + db
		}
		return reply{tag: tag}
	case cmd == "show pools":
		return s.showPools()
	case cmd == "show config":
		return s.showConfig()
	case cmd == "show tasks":
		return s.showTasks()
	case cmd == "show replication_slots":
		return s.showSlots()
	case cmd == "show version":
		return reply{cols: []string{"version"}, rows: [][]*string{{str("PgDog v0.1.54 [stand-in@0000000, pgdog-plugin 0.0.0, rustc 0.0.0]")}}, tag: "SHOW"}
	case cmd == "show peers":
		return reply{cols: []string{"addr", "last_seen", "clients"}, tag: "SHOW"}
	case (w[0] == "copy_data" || w[0] == "reshard") && (len(w) == 4 || len(w) == 5):
		return s.startTask(w)
	case w[0] == "cutover" && len(w) <= 2:
		return s.cutover(w)
	case w[0] == "stop_task" && len(w) == 2:
		id, err := strconv.ParseInt(w[1], 10, 64)
		if err != nil {
			return syntax()
		}
		v := "task not found"
		for _, t := range s.tasks {
			if t.id == id && (t.status == "running" || t.status == "started") {
				t.status, v = "cancelled", "OK"
			}
		}
		return reply{cols: []string{"stop_task"}, rows: [][]*string{{str(v)}}, tag: "STOP_TASK"}
	}
	return syntax()
}

type siPool struct {
	user, db, host, role string
	port, shard          int64
	schemaAdmin          bool
}

func (s *standIn) pools() []siPool {
	var out []siPool
	for _, u := range s.cfg.Users {
		for _, d := range s.cfg.Databases {
			if d.Name != u.Database {
				continue
			}
			p := siPool{user: u.Name, db: d.Name, host: d.Host, role: d.Role, port: 5432, shard: d.Shard, schemaAdmin: u.SchemaAdmin}
			if d.Port != nil {
				p.port = *d.Port
			}
			if p.role == "" {
				p.role = "primary"
			}
			out = append(out, p)
		}
	}
	return out
}

func (s *standIn) showPools() reply {
	r := reply{tag: "SHOW", cols: []string{"id", "database", "user", "addr", "port", "shard", "role", "cl_waiting", "sv_idle",
		"sv_active", "sv_idle_xact", "sv_total", "maxwait", "maxwait_us", "pool_mode", "paused", "banned", "healthy", "errors",
		"re_synced", "out_of_sync", "force_closed", "online", "schema_admin"}}
	for i, p := range s.pools() {
		zero := str("0")
		r.rows = append(r.rows, []*string{str(strconv.Itoa(i + 1)), str(p.db), str(p.user), str(p.host), str(strconv.FormatInt(p.port, 10)),
			str(strconv.FormatInt(p.shard, 10)), str(p.role), zero, zero, zero, zero, zero, zero, zero, str("transaction"),
			boolText(s.cfg.paused[[2]string{p.user, p.db}]), boolText(false), boolText(true), zero, zero, zero, zero, boolText(true),
			boolText(p.schemaAdmin)})
	}
	return r
}

func (s *standIn) showConfig() reply {
	vals := map[string]string{"host": "0.0.0.0", "port": "6432", "workers": "2", "default_pool_size": "10",
		"pooler_mode": "transaction", "two_phase_commit": "false", "cutover_save_config": "false", "auth_type": "scram"}
	for k, v := range s.cfg.General {
		vals[k] = fmt.Sprint(v)
	}
	r := reply{tag: "SHOW", cols: []string{"name", "value"}}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.rows = append(r.rows, []*string{str(k), str(vals[k])})
	}
	return r
}

func (s *standIn) showTasks() reply {
	r := reply{tag: "SHOW", cols: []string{"id", "scope", "type", "status", "inner_status", "started_at", "updated_at", "elapsed", "elapsed_ms"}}
	for _, t := range s.tasks {
		r.rows = append(r.rows, []*string{str(strconv.FormatInt(t.id, 10)), str("root"), str(t.kind), str(t.status), str(t.inner),
			str("2026-01-01 00:00:00"), str("2026-01-01 00:00:01"), str("1s"), str("1000")})
		if t.kind != "replication" {
			r.rows = append(r.rows, []*string{nil, str("subtask"), str("table_copy"), str(t.status), str(""),
				str("2026-01-01 00:00:00"), str("2026-01-01 00:00:01"), str("1s"), str("1000")})
		}
	}
	return r
}

func (s *standIn) showSlots() reply {
	r := reply{tag: "SHOW", cols: []string{"host", "port", "database_name", "name", "lsn", "lag", "lag_bytes", "copy_data", "last_transaction", "last_transaction_ms"}}
	for _, t := range s.tasks {
		if t.slot == "" || t.status != "running" {
			continue
		}
		var lag *string
		if t.lag != nil {
			lag = str(strconv.FormatInt(*t.lag, 10))
		}
		r.rows = append(r.rows, []*string{str("127.0.0.1"), str("5432"), str(t.src), str(t.slot), str("0/16B3748"), str("0 B"), lag,
			boolText(t.kind == "copy_data"), str("0s"), str("0")})
	}
	return r
}

func (s *standIn) schemaOwner(db string) bool {
	for _, u := range s.cfg.Users {
		if u.Database == db && u.SchemaAdmin {
			return true
		}
	}
	return false
}

func (s *standIn) startTask(w []string) reply {
	src, dst := w[1], w[2]
	for _, db := range []string{src, dst} {
		if !s.schemaOwner(db) {
			return failed("database %q has no schema owner", db)
		}
	}
	slot := ""
	if len(w) == 5 {
		slot = w[4]
	} else {
		const letters = "abcdefghijklmnopqrstuvwxyz"
		b := make([]byte, 19)
		for i := range b {
			b[i] = letters[rand.IntN(len(letters))]
		}
		slot = "__pgdog_repl_" + string(b)
	}
	t := &siTask{id: s.nextTask, kind: w[0], status: "running", inner: "syncing schema", src: src, dst: dst, slot: slot}
	s.nextTask++
	s.tasks = append(s.tasks, t)
	id := strconv.FormatInt(t.id, 10)
	if w[0] == "reshard" {
		return reply{tag: "RESHARD", cols: []string{"task_id"}, rows: [][]*string{{str(id)}}}
	}
	return reply{tag: "COPY_DATA", cols: []string{"task_id", "replication_slot"}, rows: [][]*string{{str(id), str(slot)}}}
}

func (s *standIn) cutover(w []string) reply {
	var target *siTask
	for _, t := range s.tasks {
		waiting := t.kind != "reshard" && t.status == "running" && t.inner == "replicating"
		if len(w) == 2 && strconv.FormatInt(t.id, 10) == w[1] || len(w) == 1 && waiting && target == nil {
			target = t
		}
	}
	if target == nil || target.kind == "reshard" || target.status != "running" || target.inner != "replicating" {
		return failed("task is not a replication task")
	}
	// The swap happens in memory only (cutover_save_config = false).
	for i := range s.cfg.Databases {
		switch s.cfg.Databases[i].Name {
		case target.src:
			s.cfg.Databases[i].Name = target.dst
		case target.dst:
			s.cfg.Databases[i].Name = target.src
		}
	}
	for i := range s.cfg.Users {
		switch s.cfg.Users[i].Database {
		case target.src:
			s.cfg.Users[i].Database = target.dst
		case target.dst:
			s.cfg.Users[i].Database = target.src
		}
	}
	target.status, target.inner = "finished", ""
	s.tasks = append(s.tasks, &siTask{id: s.nextTask, kind: "replication", status: "running", inner: "replicating",
		src: target.dst, dst: target.src, slot: "__pgdog_repl_reverse" + strconv.FormatInt(s.nextTask, 10)})
	s.nextTask++
	s.maint = map[string]bool{} // every hold on the instance, operators' included
	return reply{tag: "CUTOVER", cols: []string{"cutover"}, rows: [][]*string{{str("OK")}}}
}
