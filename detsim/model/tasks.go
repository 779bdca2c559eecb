package model

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
)

// Task is a background task on an instance (SHOW TASKS), with PgDog's own status words so
// an executor classifies it as it would a real one: Status is running, finished, cancelled
// or "failed: <msg>"; Inner is syncing data, replicating, cutting over, rolling back.
//
// Kind "copy_data" is COPY_DATA: a one-time COPY of the source shards into the destination,
// then a logical replication stream from every source shard, waiting for CUTOVER. Kind
// "replication" is the reverse stream CUTOVER starts from the new shards back to the old
// ones, which keeps them current until finalize (STOP_TASK) or rollback (CUTOVER of it).
// Tasks and streams live in the instance's memory: a crash ends them and they are not
// listed after the restart.
type Task struct {
	ID      int64
	Kind    string
	Status  string
	Inner   string
	Slot    string
	DB      string // the database the task serves
	Dst     string // the destination database (copy_data)
	src     []string
	dst     []string
	cursor  []uint64
	pulling bool
	retry   detsim.Handle
	started int64
	inc     uint64
	// StreamRate's bookkeeping: the snapshot the copy loads (rows and position per source,
	// taken at COPY_DATA), and the stream's budget of changes (in thousandths) and when it
	// was last topped up.
	snap   []map[string][]int64
	snapAt []uint64
	// slotAt is each source's position when the slot was created (at COPY_DATA): while the
	// copy syncs, SHOW REPLICATION_SLOTS shows what the slot holds since.
	slotAt   []uint64
	budget   int64
	toppedAt int64
}

// Type is the task's SHOW TASKS type column as PgDog words it: "reshard <db> -> <dst>" for
// a copy_data task, "replication <db> -> <dst> (reverse)" for the stream a CUTOVER starts
// (adapters/pgdog/testdata/transcript*.json).
func (t *Task) Type() string {
	if t.Kind == "copy_data" {
		return "reshard " + t.DB + " -> " + t.Dst
	}
	return t.Kind + " " + t.DB + " -> " + t.Dst + " (reverse)"
}

// ErrTask is wrapped by errors about tasks: unknown id, wrong state.
var ErrTask = errors.New("model: task")

func (t *Task) active() bool { return t.Status == "running" }

// Tasks returns the instance's tasks (nil after a crash).
func (r *Router) Tasks() []*Task { return r.tasks }

// CopyData is COPY_DATA <db> <dst> <publication> <slot>: it starts a copy task and returns
// its id, every time (pgdog admin/copy_data.rs runs a task per command): a retry whose first
// try is running starts a second task, which fails at its copy (23505, the keys are there)
// or at its stream (55006, the slot is in use).
func (r *Router) CopyData(db, dst, slot string) (int64, error) {
	src, dest := r.routes[db], r.routes[dst]
	if len(src) == 0 || len(dest) == 0 {
		return 0, &adapters.RouterError{Instance: r.ID, Op: "CopyData", Code: "58000",
			Err: fmt.Errorf("%w: database %q or %q is not configured", ErrTask, db, dst)}
	}
	r.nextTask++
	t := &Task{ID: r.nextTask, Kind: "copy_data", Status: "running", Inner: "syncing data", DB: db, Dst: dst, Slot: slot,
		src: src, dst: dest, started: r.s.Now(), inc: r.s.Net.Incarnation(r.Node)}
	for _, name := range src {
		b := r.dir[name]
		t.slotAt = append(t.slotAt, b.LSN())
		if r.StreamRate > 0 {
			t.snap, t.snapAt = append(t.snap, b.Rows()), append(t.snapAt, b.LSN())
		}
	}
	r.tasks = append(r.tasks, t)
	r.s.After(r.s.Between(200, 3000), detsim.Label{Kind: "copy", To: r.ID, ID: t.ID}, func() { r.copy(t) })
	return t.ID, nil
}

func (r *Router) alive(t *Task) bool {
	return t.active() && r.s.Net.Incarnation(r.Node) == t.inc && r.Up()
}

// copy is the initial COPY: every source row goes to the destination shard the new layout
// routes it to, and the stream starts from the position the copy saw.
//
// PgDog's copy is a plain COPY FROM STDIN, not an upsert, and it never truncates
// (backend/replication/logical/publisher/parallel_sync.rs: "Not idempotent (no
// truncate)"): a row whose key the destination shard already holds fails the copy with a
// unique violation (23505), and the task fails before it streams. So the model loads
// nothing when any destination shard holds a key the copy carries. This is what a
// COPY_DATA that lands late, after the CUTOVER swapped the two databases' names, meets: it
// copies the new layout back into the old one, which holds those keys already.
func (r *Router) copy(t *Task) {
	if !r.alive(t) {
		return
	}
	for _, name := range append(append([]string(nil), t.src...), t.dst...) {
		if !r.s.Net.Reachable(r.Node, r.dir[name].Node) {
			t.Status = "failed: copy lost its connection to " + name
			r.s.Probe("model.copy.failed")
			return
		}
	}
	at := make([]uint64, len(t.src))
	parts := make([][]map[string][]int64, len(t.src)) // per source, per destination shard
	for i, name := range t.src {
		b := r.dir[name]
		rows := b.Rows()
		at[i] = b.LSN()
		if t.snap != nil {
			rows, at[i] = t.snap[i], t.snapAt[i] // as of the slot's creation: the rest waits in the slot
		}
		parts[i] = make([]map[string][]int64, len(t.dst))
		for k, v := range rows {
			j := Route(k, len(t.dst))
			if parts[i][j] == nil {
				parts[i][j] = map[string][]int64{}
			}
			parts[i][j][k] = v
		}
	}
	for _, ps := range parts {
		for j, p := range ps {
			for _, k := range slices.Sorted(maps.Keys(p)) {
				if r.dir[t.dst[j]].Has(k) {
					t.Status = "failed: duplicate key value violates unique constraint (23505): " + t.dst[j] + " already holds key " + k
					r.s.Probe("model.copy.collided")
					return
				}
			}
		}
	}
	// Every COPY_DATA starts a task of its own, and its slots (<slot>_<shard>) are created,
	// or reused when they exist (42710: "using existing replication slot",
	// publisher/slot.rs). A slot another task streams from is active, and Postgres lets one
	// reader stream from a slot at a time (55006).
	for _, o := range r.tasks {
		if o != t && o.Slot == t.Slot && r.alive(o) && o.cursor != nil {
			t.Status = fmt.Sprintf("failed: replication slot %q is active for task %d (55006)", t.Slot, o.ID)
			r.s.Probe("model.copy.slot_active")
			return
		}
	}
	for _, ps := range parts {
		for j, p := range ps {
			if p != nil {
				r.dir[t.dst[j]].LoadRows(p)
			}
		}
	}
	t.cursor = at
	t.snap, t.snapAt = nil, nil
	t.toppedAt = r.s.Now()
	t.Inner = "replicating"
	r.subscribe(t)
}

func (r *Router) subscribe(t *Task) {
	for _, name := range t.src {
		r.dir[name].Subscribe(func() { r.wake(t) })
	}
	r.wake(t)
}

// wake schedules one pull of the stream, unless one is pending.
func (r *Router) wake(t *Task) {
	if !r.alive(t) || t.pulling || t.cursor == nil {
		return
	}
	t.pulling = true
	r.s.After(r.s.Between(1, 20), detsim.Label{Kind: "replicate", To: r.ID, ID: t.ID}, func() { r.pull(t) })
}

// pull carries every change the stream has not carried yet, per source, to the
// destination shards; a source or destination the instance cannot reach stays behind and
// is retried.
func (r *Router) pull(t *Task) {
	t.pulling = false
	if !r.alive(t) {
		return
	}
	behind := false
	if r.StreamRate > 0 {
		// Top the budget up for the time since, up to one second's worth.
		t.budget = min(t.budget+(r.s.Now()-t.toppedAt)*r.StreamRate, 1000*r.StreamRate)
		t.toppedAt = r.s.Now()
	}
	for i, name := range t.src {
		b := r.dir[name]
		if !r.s.Net.Reachable(r.Node, b.Node) {
			behind = behind || b.PendingSince(t.cursor[i]) > 0
			continue
		}
		cs := b.ChangesSince(t.cursor[i])
		if len(cs) == 0 {
			continue
		}
		if r.StreamRate > 0 {
			if n := int(t.budget / 1000); n < len(cs) {
				cs, behind = cs[:n], true
				if n == 0 {
					continue
				}
			}
			t.budget -= 1000 * int64(len(cs))
		}
		parts := make([][]Change, len(t.dst))
		for _, c := range cs {
			j := Route(c.Op.Key, len(t.dst))
			parts[j] = append(parts[j], c)
		}
		ok := true
		for j, p := range parts {
			if p != nil && !r.s.Net.Reachable(r.Node, r.dir[t.dst[j]].Node) {
				ok = false
			}
		}
		if !ok {
			behind = true
			continue
		}
		for j, p := range parts {
			if p != nil {
				r.dir[t.dst[j]].ApplyReplicated(fmt.Sprintf("%s/task%d", r.ID, t.ID), p)
			}
		}
		t.cursor[i] = cs[len(cs)-1].LSN
	}
	if behind && !t.retry.Pending() {
		t.retry = r.s.After(100, detsim.Label{Kind: "replicate-retry", To: r.ID, ID: t.ID}, func() { r.wake(t) })
	}
}

// Lag is how many client writes the task's stream has not carried yet (-1 before the copy
// finished).
func (r *Router) Lag(t *Task) int64 {
	pos := t.cursor
	if pos == nil {
		pos = t.slotAt // syncing: what the slot holds since COPY_DATA created it
	}
	if pos == nil {
		return -1
	}
	n := 0
	for i, name := range t.src {
		n += r.dir[name].PendingSince(pos[i])
	}
	return int64(n)
}

// SlotLag is the largest lag_bytes SHOW REPLICATION_SLOTS lists for the shard slots of
// slot, one per source shard: the stream's lag at 100 bytes a write, or -1 when no task of
// this instance streams through it from shards source shards (a missing shard slot).
func (r *Router) SlotLag(slot string, shards int) int64 {
	for _, t := range r.tasks {
		if t.Slot == slot && t.active() && len(t.src) == shards {
			if l := r.Lag(t); l >= 0 {
				return 100 * l
			}
		}
	}
	return -1
}

// SlotDrained reports, for the logical slots of the streams named after slot on source b
// (a task's Slot is slot, or starts with slot+"_": the copy's and the reverse stream's,
// "<slot>_reverse"), whether each has carried everything b held up to at; found is false
// when no running stream of this instance reads from b through such a slot. The slot is
// Postgres's in reality; the model keeps a stream's position (its cursor) in the task.
// It nudges each such stream to pull, as the walsender's keepalives do.
func (r *Router) SlotDrained(slot string, b *Backend, at uint64) (drained, found bool) {
	drained = true
	for _, t := range r.tasks {
		if !r.alive(t) || t.Slot != slot && !strings.HasPrefix(t.Slot, slot+"_") {
			continue
		}
		for i, name := range t.src {
			if r.dir[name] != b {
				continue
			}
			found = true
			if t.cursor == nil || slices.ContainsFunc(b.ChangesSince(t.cursor[i]), func(c Change) bool { return c.LSN <= at }) {
				drained = false
				r.wake(t)
			}
		}
	}
	return drained && found, found
}

func (r *Router) task(id int64) (*Task, error) {
	for _, t := range r.tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return nil, &adapters.RouterError{Instance: r.ID, Op: "Task", Code: "42704", Err: fmt.Errorf("%w %d is not listed", ErrTask, id)}
}

// drainTimeout bounds how long CUTOVER waits for the stream to catch up (PgDog's
// cutover_timeout, with cutover_timeout_action = abort) unless Router.CutoverTimeout says
// otherwise.
const drainTimeout = 30_000

// cutoverStall is how long fault pgdog.cutover.stall keeps a CUTOVER's drain from ending:
// past 20 listings at the scenarios' PollEvery (500 ms), under drainTimeout.
const cutoverStall = 12_000

// Cutover is CUTOVER <task>. On a copy_data task: hold every database of the instance
// (maintenance), wait until the stream has carried everything, swap the two databases in
// this instance's routing table, finish the task, start the reverse stream, and clear every
// hold on the instance. On a reverse stream (rollback, "rolling back"): the same in the
// other direction, and the new stream runs the other way again. It answers once the holds
// are cleared. The swap lives in memory only (cutover_save_config = false). Fault
// pgdog.cutover.crash makes it go wrong (see the catalogue).
func (r *Router) Cutover(id int64, reply detsim.Reply) {
	t, err := r.task(id)
	if err != nil {
		reply(nil, err)
		return
	}
	if !t.active() || t.Inner != "replicating" {
		reply(nil, &adapters.RouterError{Instance: r.ID, Op: "Cutover", Code: "58000",
			Err: fmt.Errorf("%w %d is %s/%s: task is not a replication task waiting for cutover", ErrTask, id, t.Status, t.Inner)})
		return
	}
	// pgdog.cutover.crash: a crash before the swap or after it. pgdog.cutover.fail_after_swap:
	// the task fails after the swap, which stays applied (PgDog, from code reading: when
	// saving fails after the in-memory swap the task aborts but the swap stays applied).
	mode := 0
	if r.FailAfterSwap > 0 {
		r.FailAfterSwap--
		mode = 3
	} else if r.s.Fault("pgdog.cutover.crash") {
		mode = 1 + r.s.Intn(2)
	} else if r.s.Fault("pgdog.cutover.fail_after_swap") {
		mode = 3
	}
	if mode == 1 {
		r.s.Probe("model.cutover.crash.before_swap")
		r.Crash()
		return
	}
	var stallUntil int64
	if r.s.Fault("pgdog.cutover.stall") {
		stallUntil = r.s.Now() + cutoverStall
	}
	rollback := t.Kind == "replication"
	if rollback {
		t.Inner = "rolling back"
	} else {
		t.Inner = "cutting over"
	}
	for db := range r.routes {
		r.paused[db] = true
	}
	deadline := r.s.Now() + cmp.Or(r.CutoverTimeout, drainTimeout)
	var drain func()
	drain = func() {
		if !r.alive(t) {
			return
		}
		if (r.Lag(t) != 0 || r.s.Now() < stallUntil) && !r.StaleLagSwap {
			if r.s.Now() >= deadline {
				t.Inner = "replicating"
				r.clearHolds()
				reply(nil, &adapters.RouterError{Instance: r.ID, Op: "Cutover", Code: "58000",
					Err: fmt.Errorf("%w %d: cutover abort timeout (lag %d)", ErrTask, id, r.Lag(t))})
				return
			}
			r.wake(t)
			r.s.After(10, detsim.Label{Kind: "drain", To: r.ID, ID: t.ID}, drain)
			return
		}
		r.routes[t.DB], r.routes[t.Dst] = r.routes[t.Dst], r.routes[t.DB]
		r.Loads = append(r.Loads, Load{T: r.s.Now(), Instance: r.ID, Generation: r.gen, Why: "cutover"})
		if mode == 3 {
			r.s.Probe("model.cutover.fail.after_swap")
			t.Status, t.Inner = "failed: cutover could not save the configuration (injected)", ""
			r.clearHolds()
			reply(nil, &adapters.RouterError{Instance: r.ID, Op: "Cutover", Code: "58000",
				Err: fmt.Errorf("%w %d: failed after the swap; the swap stays applied", ErrTask, id)})
			return
		}
		t.Status, t.Inner = "finished", ""
		if rollback {
			r.s.Probe("model.cutover.rollback")
		}
		// Every cutover starts the stream from the layout now served to the other one.
		r.nextTask++
		rev := &Task{ID: r.nextTask, Kind: "replication", Status: "running", Inner: "replicating", DB: t.DB, Dst: t.Dst,
			Slot: t.Slot + "_reverse", src: r.routes[t.DB], dst: r.routes[t.Dst], started: r.s.Now(), inc: t.inc}
		rev.cursor = make([]uint64, len(rev.src))
		for i, name := range rev.src {
			rev.cursor[i] = r.dir[name].LSN()
		}
		r.tasks = append(r.tasks, rev)
		r.subscribe(rev)
		if mode == 2 {
			r.s.Probe("model.cutover.crash.after_swap")
			r.Crash()
			if r.s.Healed() {
				// The crash was decided at the CUTOVER, while faults were on, and lands once
				// the drain is done, after the heal, which boots only the instances down
				// then: restart it as the heal would have (seed 378274 of the cutover
				// scenario: the designated instance stayed down for good and the cutover
				// could not converge).
				r.s.After(100, detsim.Label{Kind: "boot", To: r.ID}, r.Boot)
			}
			return
		}
		r.clearHolds()
		reply(nil, nil)
	}
	drain()
}

// clearHolds ends every hold on the instance (maintenance off), as the end of any cutover
// does in PgDog, operators' holds included.
func (r *Router) clearHolds() {
	for _, db := range slices.Sorted(maps.Keys(r.paused)) {
		r.Resume(db)
	}
}

// StopTask is STOP_TASK <id>: the task is cancelled and its stream stops.
func (r *Router) StopTask(id int64) error {
	t, err := r.task(id)
	if err != nil {
		return err
	}
	if t.active() {
		t.Status, t.Inner = "cancelled", ""
	}
	return nil
}
