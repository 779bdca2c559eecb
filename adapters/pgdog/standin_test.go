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
// because PgDog itself cannot be built or run where these tests run. It answers with what a
// real PgDog answered, replayed from the recorded transcripts (testdata/transcript*.json,
// transcript_test.go): every reply's columns (names, type OIDs, sizes), command tag, error
// severity, SQLSTATE and message, and whether PgDog closed the connection after it, are
// the recorded exchange's of the same label, with the command's arguments put in where
// the recording had its own. What the stand-in keeps itself is only the state a recording
// cannot hold for another test's files: which pools the files it was started with make
// (and their paused flag), the maintenance holds, and the tasks. Rows are built from that
// state in the recorded columns; a column the state does not know takes the recorded
// value; every cell must have a lexical form the recording shows for its column.
//
// A command no recording holds (a label with no exchange, or a reply that does not conform
// to any exchange of its label) is answered with an ERROR naming it, SQLSTATE XX000, and is
// kept in Unrecorded; startStandIn fails the test that made it unless the test takes it
// (TakeUnrecorded) as the answer it expects. Recording more (LOAM_PGDOG_BIN, -record) is
// how the stand-in learns a command.
//
// Task ids start where the recording's first COPY_DATA's did (a freshly started PgDog: 0),
// and a task's type is PgDog's description ("reshard <from> -> <to>"), as recorded.
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

	tr         *Transcript
	unrecorded []string
	// cutoverFails, when set, makes the next requested cutover end its task failed with
	// it as the message, and swap nothing (PgDog: an error before the swap).
	cutoverFails string
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
	copyData            bool
	// cutting: a CUTOVER was accepted and its swap is still to come (PgDog's CUTOVER only
	// requests it; the task swaps once caught up, then finishes); shown: a listing showed
	// it so, and the next one shows it done.
	cutting, shown bool
	suffix         string // " (reverse)" for the stream a cutover started
	// unstreamed: replicating, but its replication subtask is not listed yet (recorded:
	// PgDog sets the stage before it sets up the stream; see RootTasks).
	unstreamed bool
}

// newStandIn starts a stand-in on 127.0.0.1 that was "started with" the files in dir.
func newStandIn(dir, password string) (*standIn, error) {
	tr, err := recorded()
	if err != nil {
		return nil, err
	}
	first, err := tr.firstTask()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &standIn{ln: ln, dir: dir, password: password, conns: map[net.Conn]bool{}, maint: map[string]bool{}, nextTask: first, tr: tr}
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

// TakeUnrecorded returns the commands answered with "no recording holds this" since the
// last call, and forgets them.
func (s *standIn) TakeUnrecorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.unrecorded
	s.unrecorded = nil
	return u
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
			if t.cutting && status == "finished" {
				s.finishCutover(t)
			}
			t.status, t.inner, t.lag = status, inner, lag
		}
	}
}

// SetUnstreamed says whether the replicating task id lists no replication subtask yet.
func (s *standIn) SetUnstreamed(id int64, unstreamed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if t.id == id {
			t.unstreamed = unstreamed
		}
	}
}

// FailCutover makes the next requested cutover fail before its swap with message msg.
func (s *standIn) FailCutover(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutoverFails = msg
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
			if !s.send(b, s.answer(reply{label: "extended protocol"}, "(extended protocol)")) {
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
			if m.Parameters["database"] != "admin" || m.Parameters["user"] != "admin" {
				s.send(b, s.answer(reply{label: "login other database"}, "(startup as "+m.Parameters["user"]+" to "+m.Parameters["database"]+")"))
				return false
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
				s.send(b, s.answer(reply{label: "login wrong password"}, "(startup as admin, wrong password)"))
				return false
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

// row is one row the stand-in's state makes, by column name (nil: NULL). Columns it does
// not name take the value the recording shows.
type row map[string]*string

// reply is what the stand-in's state says one command answers: the label of the recorded
// exchanges whose shape it takes, and, for a reply with rows, the rows (keep: the
// recorded rows as they are, with set's values put in by name).
type reply struct {
	label string
	rows  []row
	keep  bool
	set   map[string]string // for keep: name column -> value column (SHOW CONFIG)
}

func str(s string) *string { return &s }

func boolText(b bool) *string {
	if b {
		return str("t")
	}
	return str("f")
}

// instantiate puts command's arguments where the recorded command rec had its own.
func instantiate(s, rec, command string) string {
	s = generic(s, rec)
	a := args(command)
	for i := len(a); i >= 1; i-- { // $10 before $1
		s = strings.ReplaceAll(s, "$"+strconv.Itoa(i), a[i-1])
	}
	return s
}

// answer builds the reply to command from the recorded exchanges of r.label, or an
// "unrecorded" error when no recording holds it.
func (s *standIn) answer(r reply, command string) Exchange {
	recs := s.tr.byLabel(r.label)
	if len(recs) == 0 {
		return s.unrecordedReply(command, fmt.Sprintf("no recorded exchange is labelled %q", r.label))
	}
	rec := recs[0]
	e := Exchange{Label: r.label, Command: command, Columns: rec.Columns, Tag: instantiate(rec.Tag, rec.Command, command), Closed: rec.Closed}
	if rec.Error != nil {
		e.Error = &ErrorText{Severity: rec.Error.Severity, Code: rec.Error.Code, Message: instantiate(rec.Error.Message, rec.Command, command)}
	}
	// defaults: the first recorded value of each column, across the label's exchanges.
	def := map[string]*string{}
	for _, x := range recs {
		for _, rw := range x.Rows {
			for j, v := range rw {
				if c := x.Columns[j].Name; def[c] == nil && v != nil {
					def[c] = v
				}
			}
		}
	}
	switch {
	case r.keep:
		for _, rw := range rec.Rows {
			out := slices.Clone(rw)
			if len(rw) == 2 && rw[0] != nil {
				if v, ok := r.set[*rw[0]]; ok {
					out[1] = str(v)
				}
			}
			e.Rows = append(e.Rows, out)
		}
	default:
		for _, m := range r.rows {
			out := make([]*string, len(e.Columns))
			for j, c := range e.Columns {
				if v, ok := m[c.Name]; ok {
					out[j] = v
				} else {
					out[j] = def[c.Name]
				}
			}
			e.Rows = append(e.Rows, out)
		}
	}
	if why := s.tr.conform(r.label, e); why != "" {
		return s.unrecordedReply(command, why)
	}
	return e
}

// unrecordedReply is the stand-in's answer to what no recording holds. s.mu is held.
func (s *standIn) unrecordedReply(command, why string) Exchange {
	s.unrecorded = append(s.unrecorded, command+": "+why)
	return Exchange{Command: command, Error: &ErrorText{Severity: "ERROR", Code: "XX000",
		Message: "PgDog stand-in: no recorded PgDog reply holds " + strconv.Quote(command) + ": " + why + " (record it: LOAM_PGDOG_BIN=... go test ./adapters/pgdog -run TestRealPgDogTranscript -record)"}}
}

// send writes e and ReadyForQuery (unless PgDog closed the connection after it); it
// returns false once the connection must close.
func (s *standIn) send(b *pgproto3.Backend, e Exchange) bool {
	if e.Error != nil {
		b.Send(&pgproto3.ErrorResponse{Severity: e.Error.Severity, SeverityUnlocalized: e.Error.Severity, Code: e.Error.Code, Message: e.Error.Message})
		if e.Closed {
			b.Flush()
			return false
		}
	} else {
		if e.Columns != nil {
			var fds []pgproto3.FieldDescription
			for _, c := range e.Columns {
				fds = append(fds, pgproto3.FieldDescription{Name: []byte(c.Name), DataTypeOID: c.TypeOID, DataTypeSize: c.Size, TypeModifier: -1})
			}
			b.Send(&pgproto3.RowDescription{Fields: fds})
			for _, rw := range e.Rows {
				vals := make([][]byte, len(rw))
				for j, v := range rw {
					if v != nil {
						vals[j] = []byte(*v)
					}
				}
				b.Send(&pgproto3.DataRow{Values: vals})
			}
		}
		b.Send(&pgproto3.CommandComplete{CommandTag: []byte(e.Tag)})
	}
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	return b.Flush() == nil
}

// query answers one Query message; it returns false once the connection must close.
func (s *standIn) query(b *pgproto3.Backend, raw string) bool {
	s.mu.Lock()
	s.received = append(s.received, raw)
	e := s.answer(s.run(strings.ToLower(strings.TrimSpace(strings.ReplaceAll(raw, ";", "")))), raw)
	s.mu.Unlock()
	return s.send(b, e)
}

// run parses and executes one lowercased command against the stand-in's state and says
// which recorded exchange answers it; s.mu is held.
func (s *standIn) run(cmd string) reply {
	w := strings.Split(cmd, " ")
	switch {
	case cmd == "reload":
		if err := s.load(); err != nil {
			return reply{label: "reload bad file"}
		}
		return reply{label: "reload"}
	case (w[0] == "pause" || w[0] == "resume") && len(w) <= 3:
		user, db := "", ""
		label := w[0] + " all"
		switch len(w) {
		case 2:
			db, label = w[1], w[0]+" db"
		case 3:
			user, db, label = w[1], w[2], w[0]+" user db"
		}
		for _, p := range s.pools() {
			if (db == "" || p.db == db) && (user == "" || p.user == user) {
				s.cfg.paused[[2]string{p.user, p.db}] = w[0] == "pause"
			}
		}
		return reply{label: label}
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
		if db == "" {
			return reply{label: "maintenance " + w[1] + " all"}
		}
		return reply{label: "maintenance " + w[1] + " db"}
	case cmd == "show pools":
		return s.showPools()
	case cmd == "show config":
		set := map[string]string{}
		for k, v := range s.cfg.General {
			set[k] = fmt.Sprint(v)
		}
		return reply{label: "show config", keep: true, set: set}
	case cmd == "show tasks":
		return s.showTasks()
	case cmd == "show replication_slots":
		return s.showSlots()
	case cmd == "show version":
		return reply{label: "show version", keep: true}
	case cmd == "show peers":
		return reply{label: "show peers", keep: true}
	case (w[0] == "copy_data" || w[0] == "reshard") && (len(w) == 4 || len(w) == 5):
		return s.startTask(w)
	case w[0] == "cutover" && len(w) <= 2:
		return s.cutover(w)
	case w[0] == "stop_task" && len(w) == 2:
		id, err := strconv.ParseInt(w[1], 10, 64)
		if err != nil {
			return reply{label: "syntax error"}
		}
		for _, t := range s.tasks {
			if t.id == id && (t.status == "running" || t.status == "started") {
				t.status = "cancelled"
				return reply{label: "stop_task", rows: []row{{"stop_task": str("OK")}}}
			}
		}
		// PgDog answers so for a task that failed too (recorded: STOP_TASK of a failed
		// COPY_DATA), not only for an id it never had.
		return reply{label: "stop_task not found", rows: []row{{"stop_task": str("task not found")}}}
	case w[0] == "show":
		return reply{label: cmd} // a SHOW the stand-in does not model: PgDog may know it
	}
	return reply{label: "syntax error"}
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
	r := reply{label: "show pools"}
	for i, p := range s.pools() {
		r.rows = append(r.rows, row{"id": str(strconv.Itoa(i)), "database": str(p.db), "user": str(p.user), "addr": str(p.host),
			"port": str(strconv.FormatInt(p.port, 10)), "shard": str(strconv.FormatInt(p.shard, 10)), "role": str(p.role),
			"paused": boolText(s.cfg.paused[[2]string{p.user, p.db}]), "schema_admin": boolText(p.schemaAdmin)})
	}
	return r
}

func (s *standIn) showTasks() reply {
	r := reply{label: "show tasks"}
	// A cutover the last listing showed in progress is done by this one.
	for _, t := range s.tasks {
		if t.cutting && t.shown {
			s.finishCutover(t)
		}
	}
	// Newest task first, each followed by its subtasks, as PgDog lists them (recorded).
	for _, t := range slices.Backward(s.tasks) {
		r.rows = append(r.rows, row{"id": str(strconv.FormatInt(t.id, 10)), "scope": str("root"), "type": str(t.kind + " " + t.src + " -> " + t.dst + t.suffix),
			"status": str(t.status), "inner_status": str(t.inner)})
		for _, sub := range t.subtasks() {
			r.rows = append(r.rows, row{"id": nil, "scope": str("subtask"), "type": str(sub[0] + " " + t.src + " -> " + t.dst),
				"status": str(sub[1]), "inner_status": str(sub[2])})
		}
		t.shown = t.cutting
	}
	return r
}

// subtasks are a COPY_DATA task's subtasks at its stage, (type, status, inner_status),
// as recorded: the schema sync before the copy, the copy, the schema sync after it, and
// the replication, which reports the cutover's stage while the task's own row says
// replicating. A replication task has none.
func (t *siTask) subtasks() [][3]string {
	if t.kind == "replication" {
		return nil
	}
	pre := [3]string{"schema_sync(pre)", "finished", "syncing tables"}
	switch t.inner {
	case "syncing schema", "":
		return [][3]string{{"schema_sync(pre)", t.status, "loading schema"}}
	case "syncing data":
		return [][3]string{pre, {"copy_data", "started", ""}}
	case "finalizing schema":
		return [][3]string{pre, {"copy_data", "finished", ""}, {"schema_sync(post)", "running", "creating indexes"}}
	}
	if t.unstreamed && t.status == "running" && !t.cutting {
		return [][3]string{pre, {"copy_data", "finished", ""}, {"schema_sync(post)", "finished", "creating indexes"}}
	}
	repl := [3]string{"replication", "running", "replicating"}
	switch {
	case t.cutting:
		repl[2] = "cutting over"
	case t.status == "finished":
		repl = [3]string{"replication", "finished", "cutting over"}
	case t.status != "running":
		repl = [3]string{"replication", t.status, "stopping"}
	}
	return [][3]string{pre, {"copy_data", "finished", ""}, {"schema_sync(post)", "finished", "creating indexes"}, repl}
}

// showSlots lists the slots of the running tasks: one per source shard, named
// <slot>_<shard>, as PgDog names them.
func (s *standIn) showSlots() reply {
	r := reply{label: "show replication_slots"}
	for _, t := range s.tasks {
		if t.slot == "" || t.status != "running" || t.inner != "replicating" {
			continue
		}
		lag := str("0") // PgDog lists 0 until the stream has measured it
		if t.lag != nil {
			lag = str(strconv.FormatInt(*t.lag, 10))
		}
		for _, shard := range s.shards(t.src) {
			r.rows = append(r.rows, row{"host": str("127.0.0.1"), "port": str("5432"), "database_name": str(t.src), "name": str(t.slot + "_" + strconv.FormatInt(shard, 10)),
				"lsn": str("0/16B3748"), "lag": str("0 B"), "lag_bytes": lag, "copy_data": boolText(t.copyData)})
		}
	}
	return r
}

// shards lists the shard numbers of database db in the config the stand-in runs.
func (s *standIn) shards(db string) []int64 {
	var out []int64
	for _, d := range s.cfg.Databases {
		if d.Name == db && !slices.Contains(out, d.Shard) {
			out = append(out, d.Shard)
		}
	}
	return out
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
			return reply{label: w[0] + " unknown database"}
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
	// PgDog describes a COPY_DATA task as "reshard <from> -> <to>" too (recorded).
	t := &siTask{id: s.nextTask, kind: "reshard", status: "running", inner: "syncing schema", src: src, dst: dst, slot: slot, copyData: true}
	s.nextTask++
	s.tasks = append(s.tasks, t)
	id := str(strconv.FormatInt(t.id, 10))
	if w[0] == "reshard" {
		return reply{label: "reshard", rows: []row{{"task_id": id}}}
	}
	return reply{label: "copy_data", rows: []row{{"task_id": id, "replication_slot": str(slot)}}}
}

func (s *standIn) cutover(w []string) reply {
	var target *siTask
	for _, t := range s.tasks {
		waiting := t.status == "running" && t.inner == "replicating"
		if len(w) == 2 && strconv.FormatInt(t.id, 10) == w[1] || len(w) == 1 && waiting && target == nil {
			target = t
		}
	}
	switch {
	case len(w) == 1 && target == nil:
		return reply{label: "cutover nothing"}
	case target == nil:
		return reply{label: "cutover unknown task"}
	case target.status != "running" || target.inner != "replicating" && !target.cutting:
		return reply{label: "cutover not replicating"}
	}
	// PgDog's CUTOVER only requests the cutover: the task shows "cutting over" and swaps
	// later (finishCutover). A CUTOVER while it is in progress is accepted again.
	label := "cutover"
	if target.cutting {
		label = "cutover in progress"
	}
	target.cutting = true
	return reply{label: label, rows: []row{{"cutover": str("OK")}}}
}

// finishCutover is the swap a CUTOVER requested: the two databases' names swapped in
// memory only (cutover_save_config = false), the task finished, the reverse stream
// started as a new task, every maintenance hold cleared.
func (s *standIn) finishCutover(target *siTask) {
	target.cutting = false
	if s.cutoverFails != "" {
		target.status, s.cutoverFails = "failed: "+s.cutoverFails, ""
		s.maint = map[string]bool{}
		return
	}
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
	target.status = "finished" // its own row keeps saying replicating (recorded)
	// The reverse stream is described by the forward names and reuses the slot name on
	// the destination (recorded).
	s.tasks = append(s.tasks, &siTask{id: s.nextTask, kind: "replication", status: "running", inner: "replicating",
		src: target.src, dst: target.dst, suffix: " (reverse)", slot: target.slot})
	s.nextTask++
	s.maint = map[string]bool{} // every hold on the instance, operators' included
}
