package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
)

// OpKind is what one operation of a transaction does to a row. Rows are lists of integers:
// list-append appends, bank balances are one-element lists that Add changes.
type OpKind uint8

const (
	OpRead OpKind = iota + 1
	OpAppend
	OpAdd
)

func (k OpKind) String() string {
	switch k {
	case OpRead:
		return "r"
	case OpAppend:
		return "append"
	case OpAdd:
		return "add"
	}
	return "op" + strconv.Itoa(int(k))
}

// Op is one operation on a row.
type Op struct {
	Kind  OpKind
	Key   string
	Value int64
}

// Txn is a transaction on one shard; ID is the workload operation it belongs to.
type Txn struct {
	ID  int64
	Ops []Op
}

// Change is one committed write in a backend's log, as logical replication streams it.
// Origin is empty for a client's write and names the stream for a replicated one, so a
// stream never sends back what it received (Postgres's origin filtering).
type Change struct {
	LSN    uint64
	Op     Op
	Origin string
	TxnID  int64
}

// Accept is a client transaction a backend committed, for the checkers; Step orders it
// within a millisecond.
type Accept struct {
	T       int64
	Step    int
	Backend string
	Via     string // the router instance (or coordinator) whose session ran it
	TxnID   int64
	Writes  bool
	Prepare string // the gid, when it was a 2PC COMMIT PREPARED
}

// Fence is a FenceWrites or UnfenceWrites that took effect, for the checkers. Step is the
// simulator's event count when it happened: it orders events within one millisecond.
type Fence struct {
	T       int64
	Step    int
	Backend string
	Role    string
	On      bool
}

// Resolution is a COMMIT PREPARED or ROLLBACK PREPARED, and who issued it.
type Resolution struct {
	T       int64
	Backend string
	GID     string
	Commit  bool
	By      string
}

type session struct {
	role  string
	alive bool
	ended string // why it ended: "fence" or "restart"
}

// PreparedTxn is a prepared (two-phase) transaction: list writes (Txn) or table rows.
type PreparedTxn struct {
	GID   string
	At    int64 // the backend's clock when it was prepared
	Owner string
	Txn   Txn
	Table string
	Rows  []TableRow
}

// Backend is one shard's Postgres server as the control plane and the routers see it:
// rows, a change log, roles that may or may not log in, sessions that end when the fence
// terminates them or the server restarts, and prepared transactions that survive restarts.
//
// AckEarly is the mutant "acknowledges a write before it is durable": a commit is visible
// and acknowledged at once but reaches disk FlushDelay later, and a restart in between loses
// it.
type Backend struct {
	s    *detsim.Sim
	Name string
	Node detsim.NodeID

	AckEarly   bool
	FlushDelay int64
	// LeakyFence is the mutant "the fence checks after writing": a transaction whose login
	// the fence refuses is applied anyway, and refused (28000) all the same.
	LeakyFence bool
	// SyncCommit, when set, is asked after a transaction's writes committed locally whether
	// the commit may be acknowledged (synchronous replication, see Standby): an error is what
	// the client gets instead, the writes staying committed on this server.
	SyncCommit func() error

	login    map[string]bool
	sessions map[uint64]*session
	nextSess uint64
	rows     map[string][]int64
	tables   map[string][]TableRow
	log      []Change
	lsn      uint64
	prepared map[string]*PreparedTxn
	unsynced []Change // AckEarly: committed, acknowledged, not yet durable
	flush    detsim.Handle
	subs     []func()

	// Histories for the checkers.
	Accepted    []Accept
	Fences      []Fence
	Resolutions []Resolution
	Restarts    []int64
}

// NewBackend adds a backend node. roles are the roles that may log in.
func NewBackend(s *detsim.Sim, name string, roles ...string) *Backend {
	b := &Backend{s: s, Name: name, login: map[string]bool{}, sessions: map[uint64]*session{},
		rows: map[string][]int64{}, prepared: map[string]*PreparedTxn{}, FlushDelay: 50}
	if s != nil {
		b.Node = s.Net.AddNode(name)
	}
	for _, r := range roles {
		b.login[r] = true
	}
	return b
}

func (b *Backend) now() int64 {
	if b.s == nil {
		return 0
	}
	return b.s.Now()
}

func (b *Backend) step() int {
	if b.s == nil {
		return 0
	}
	return b.s.Steps()
}

func (b *Backend) err(op, code string, fenced bool, format string, a ...any) error {
	return &adapters.BackendError{Backend: b.Name, Op: op, Code: code, Fenced: fenced, Err: fmt.Errorf(format, a...)}
}

// Session codes, as Postgres answers them.
const (
	CodeLoginRefused = "28000" // role is not permitted to log in
	CodeTerminated   = "57P01" // terminating connection due to administrator command
	CodeUndefined    = "42704" // prepared transaction does not exist
	CodeDuplicate    = "42710" // transaction identifier is already in use
)

// connect checks a session, or logs in a new one for role. It returns the session id.
func (b *Backend) connect(op, role string, sess uint64) (uint64, error) {
	if sess != 0 {
		se, ok := b.sessions[sess]
		if ok && se.alive {
			return sess, nil
		}
		why := "restart"
		if ok {
			why = se.ended
		}
		return 0, b.err(op, CodeTerminated, why == "fence", "session %d ended (%s)", sess, why)
	}
	if !b.login[role] {
		return 0, b.err(op, CodeLoginRefused, true, "role %q is not permitted to log in", role)
	}
	b.nextSess++
	b.sessions[b.nextSess] = &session{role: role, alive: true}
	return b.nextSess, nil
}

// Exec runs txn in a session of role (sess 0: log in first) and returns the rows its reads
// saw, in order, and the session to use next time. via names the caller, for the checkers.
func (b *Backend) Exec(role string, sess uint64, via string, txn Txn) ([][]int64, uint64, error) {
	sess, err := b.connect("Exec", role, sess)
	if err != nil {
		if b.LeakyFence && sess == 0 && !b.login[role] {
			for _, op := range txn.Ops {
				if op.Kind != OpRead {
					b.apply(op, "", txn.ID)
				}
			}
			b.committed()
		}
		return nil, 0, err
	}
	var reads [][]int64
	writes := false
	for _, op := range txn.Ops {
		if op.Kind == OpRead {
			reads = append(reads, slices.Clone(b.rows[op.Key]))
			continue
		}
		writes = true
		b.apply(op, "", txn.ID)
	}
	b.Accepted = append(b.Accepted, Accept{T: b.now(), Step: b.step(), Backend: b.Name, Via: via, TxnID: txn.ID, Writes: writes})
	b.committed()
	if writes && b.SyncCommit != nil {
		if err := b.SyncCommit(); err != nil {
			return nil, 0, err
		}
	}
	return reads, sess, nil
}

// apply commits one write and logs it.
func (b *Backend) apply(op Op, origin string, txn int64) {
	switch op.Kind {
	case OpAppend:
		b.rows[op.Key] = append(b.rows[op.Key], op.Value)
	case OpAdd:
		cur := b.rows[op.Key]
		if len(cur) == 0 {
			cur = []int64{0}
		}
		b.rows[op.Key] = []int64{cur[0] + op.Value}
	default:
		panic("model: apply of a read")
	}
	b.lsn++
	c := Change{LSN: b.lsn, Op: op, Origin: origin, TxnID: txn}
	b.log = append(b.log, c)
	if b.AckEarly {
		b.unsynced = append(b.unsynced, c)
	}
}

// committed runs after a commit: the AckEarly mutant schedules its late flush, and
// replication subscribers are woken.
func (b *Backend) committed() {
	if b.AckEarly && len(b.unsynced) > 0 && !b.flush.Pending() && b.s != nil {
		b.flush = b.s.After(b.FlushDelay, detsim.Label{Kind: "flush", To: b.Name}, func() { b.unsynced = nil })
	}
	for _, f := range b.subs {
		f()
	}
}

// Prepare runs txn's writes as a prepared transaction gid (PREPARE TRANSACTION): nothing is
// visible until CommitPrepared.
func (b *Backend) Prepare(role string, sess uint64, gid string, txn Txn) (uint64, error) {
	sess, err := b.connect("Prepare", role, sess)
	if err != nil {
		return 0, err
	}
	if _, dup := b.prepared[gid]; dup {
		return sess, b.err("Prepare", CodeDuplicate, false, "transaction identifier %q is already in use", gid)
	}
	b.prepared[gid] = &PreparedTxn{GID: gid, At: b.now(), Owner: role, Txn: txn}
	return sess, nil
}

// Resolve is COMMIT PREPARED (commit) or ROLLBACK PREPARED gid, run in a session of role
// (sess 0: log in first; role "" is a superuser, which the fence does not stop). by names
// the caller, for the checkers.
func (b *Backend) Resolve(role string, sess uint64, gid string, commit bool, by string) (uint64, error) {
	if role != "" {
		var err error
		if sess, err = b.connect("Resolve", role, sess); err != nil {
			return 0, err
		}
	}
	p, ok := b.prepared[gid]
	if !ok {
		return sess, b.err("Resolve", CodeUndefined, false, "prepared transaction with identifier %q does not exist", gid)
	}
	delete(b.prepared, gid)
	b.Resolutions = append(b.Resolutions, Resolution{T: b.now(), Backend: b.Name, GID: gid, Commit: commit, By: by})
	if commit {
		for _, op := range p.Txn.Ops {
			if op.Kind != OpRead {
				b.apply(op, "", p.Txn.ID)
			}
		}
		if p.Table != "" {
			b.insertRows(p.Table, p.Rows)
		}
		b.Accepted = append(b.Accepted, Accept{T: b.now(), Step: b.step(), Backend: b.Name, Via: by, TxnID: p.Txn.ID, Writes: true, Prepare: gid})
		b.committed()
	}
	return sess, nil
}

// ErrNoRole is wrapped by FenceWrites and UnfenceWrites for a role the backend does not
// have (Postgres 42704): fencing a misnamed role would leave the real one writing.
var ErrNoRole = errors.New("model: role does not exist")

func (b *Backend) checkRole(op, role string) error {
	if _, ok := b.login[role]; !ok || role == "" {
		return b.err(op, CodeUndefined, false, "role %q: %w", role, ErrNoRole)
	}
	return nil
}

// FenceWrites stops role from writing: no new logins, and every session of the role ended
// before it returns (§6.4 step 3).
func (b *Backend) FenceWrites(role string) error {
	if err := b.checkRole("FenceWrites", role); err != nil {
		return err
	}
	b.login[role] = false
	for _, id := range slices.Sorted(maps.Keys(b.sessions)) {
		if se := b.sessions[id]; se.role == role && se.alive {
			se.alive, se.ended = false, "fence"
		}
	}
	b.Fences = append(b.Fences, Fence{T: b.now(), Step: b.step(), Backend: b.Name, Role: role, On: true})
	return nil
}

// UnfenceWrites lets role log in again.
func (b *Backend) UnfenceWrites(role string) error {
	if err := b.checkRole("UnfenceWrites", role); err != nil {
		return err
	}
	b.login[role] = true
	b.Fences = append(b.Fences, Fence{T: b.now(), Step: b.step(), Backend: b.Name, Role: role, On: false})
	return nil
}

// FencedAt reports whether role was fenced at the simulator's event count step.
func (b *Backend) FencedAt(role string, step int) bool {
	on := false
	for _, f := range b.Fences {
		if f.Role == role && f.Step <= step {
			on = f.On
		}
	}
	return on
}

// Fenced reports whether role is refused.
func (b *Backend) Fenced(role string) bool { return !b.login[role] }

// Prepared lists the prepared transactions, by gid.
func (b *Backend) Prepared() []adapters.PreparedXact {
	out := make([]adapters.PreparedXact, 0, len(b.prepared))
	for _, gid := range slices.Sorted(maps.Keys(b.prepared)) {
		p := b.prepared[gid]
		out = append(out, adapters.PreparedXact{GID: gid, Prepared: time.UnixMilli(p.At).UTC(), Owner: p.Owner, Database: "app"})
	}
	return out
}

// PreparedTxns returns the prepared transactions themselves, for the checkers.
func (b *Backend) PreparedTxns() map[string]*PreparedTxn { return b.prepared }

// Status reports a primary at the log's position.
func (b *Backend) Status() adapters.BackendStatus {
	return adapters.BackendStatus{Role: adapters.RolePrimary, Position: fmt.Sprintf("0/%X", b.lsn)}
}

// LSN is the position of the last committed write.
func (b *Backend) LSN() uint64 { return b.lsn }

// Rows returns a copy of every row.
func (b *Backend) Rows() map[string][]int64 {
	out := make(map[string][]int64, len(b.rows))
	for k, v := range b.rows {
		out[k] = slices.Clone(v)
	}
	return out
}

// Row returns a copy of one row.
func (b *Backend) Row(key string) []int64 { return slices.Clone(b.rows[key]) }

// Has reports whether the backend holds a row with key: a primary key a COPY into it
// would collide with.
func (b *Backend) Has(key string) bool { _, ok := b.rows[key]; return ok }

// ChangesSince returns the client writes (origin empty) committed after lsn, in order.
func (b *Backend) ChangesSince(lsn uint64) []Change {
	i, _ := slices.BinarySearchFunc(b.log, lsn+1, func(c Change, l uint64) int { return int(c.LSN) - int(l) })
	var out []Change
	for _, c := range b.log[i:] {
		if c.Origin == "" {
			out = append(out, c)
		}
	}
	return out
}

// PendingSince counts the client writes after lsn (a stream's lag).
func (b *Backend) PendingSince(lsn uint64) int { return len(b.ChangesSince(lsn)) }

// ApplyReplicated applies changes a stream carried from another backend (the replication
// role is never fenced).
func (b *Backend) ApplyReplicated(origin string, cs []Change) {
	for _, c := range cs {
		b.apply(c.Op, origin, c.TxnID)
	}
	if len(cs) > 0 {
		b.committed()
	}
}

// LoadRows installs rows as the initial COPY of a reshard does (origin "copy").
func (b *Backend) LoadRows(rows map[string][]int64) {
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		b.rows[k] = slices.Clone(rows[k])
		b.lsn++
		b.log = append(b.log, Change{LSN: b.lsn, Op: Op{Kind: OpAppend, Key: k}, Origin: "copy"})
	}
}

// Subscribe calls f after every commit (a replication stream's wake-up).
func (b *Backend) Subscribe(f func()) { b.subs = append(b.subs, f) }

// Crash stops the server: every session ends, and (AckEarly) what was acknowledged but not
// flushed is lost. Prepared transactions, rows and the log survive, as on disk.
func (b *Backend) Crash() {
	for _, se := range b.sessions {
		if se.alive {
			se.alive, se.ended = false, "restart"
		}
	}
	if b.s != nil {
		b.s.Cancel(b.flush)
		b.s.Net.Crash(b.Node)
	}
	for i := len(b.unsynced) - 1; i >= 0; i-- {
		b.undo(b.unsynced[i])
	}
	b.unsynced = nil
	b.Restarts = append(b.Restarts, b.now())
}

func (b *Backend) undo(c Change) {
	b.log = slices.DeleteFunc(b.log, func(x Change) bool { return x.LSN == c.LSN })
	switch c.Op.Kind {
	case OpAppend:
		r := b.rows[c.Op.Key]
		if i := slices.Index(r, c.Op.Value); i >= 0 {
			b.rows[c.Op.Key] = slices.Delete(slices.Clone(r), i, i+1)
		}
	case OpAdd:
		if r := b.rows[c.Op.Key]; len(r) > 0 {
			b.rows[c.Op.Key] = []int64{r[0] - c.Op.Value}
		}
	}
}

// Boot brings the server back after Crash.
func (b *Backend) Boot() {
	if b.s != nil {
		b.s.Net.Restart(b.Node)
	}
}
