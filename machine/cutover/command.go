package cutover

import (
	"errors"
	"strconv"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Command is what the machine asks the driver to do. Commands returned by one On call are
// independent of each other: the driver may run them in parallel, in any order. Every
// command but Alert, Done and the timer commands must be answered exactly once, with the
// input its doc names, carrying the command's Step; a call that times out is answered with
// an error. Before executing the commands of an On call the driver persists Snapshot(), so
// that a restarted driver can Restore and feed Restarted (see Restarted).
//
// Step ids are deterministic: "<db>/<g>/<stage>[/<target>]", where g is the generation the
// cutover started from, with "#<n>" after it for the n-th attempt of the step (n ≥ 2).
// A command re-sent after a restart is the same attempt and keeps its step id, so an
// executor can recognise it; a retry after a failed answer is a new attempt with its own,
// so that the answer to each attempt is told from a late or repeated answer to an earlier
// one. Every command is idempotent on the systems it touches except Cutover, which the
// machine never repeats blindly.
//
// An answer must be final: answer a command, even with an error, only once its attempt has
// taken effect or never will (a Fence whose call timed out is answered once its session on
// the server has ended, or once a server-side statement or lock timeout shorter than the
// call's has run out). The machine settles a step only on the answer of the attempt in
// flight and never sends the command that undoes another (Unfence after Fence, Resume
// after Pause, and the other way round) while an attempt of it is unanswered; a fence or a
// hold is a switch that whichever command runs last decides, and an attempt still running
// after its answer could run after the command that was meant to undo it.
type Command interface {
	isCommand()
	String() string
}

// WriteRecord asks for a compare-and-set of Record on the shard map store, expecting the
// stored version Expect (adapters.ShardMapStore.CAS). Answer with RecordWritten; on
// *adapters.ConflictError put its Current in RecordWritten.Conflict.
type WriteRecord struct {
	Step   string
	Expect uint64
	Record *shardmap.Record
}

// CopyData asks the designated instance to start copying Source into Destination:
// PgDog's COPY_DATA <source> <destination> <publication> <slot>, which syncs schema,
// copies, then replicates until an explicit CUTOVER (RESHARD is not used: it cuts over on
// its own, on one instance). Slot is deterministic, so a retried CopyData can find the task
// it started. Answer with CopyStarted.
type CopyData struct {
	Step, Instance                         string
	Source, Destination, Publication, Slot string
}

// PollCopy asks for the copy task's state (SHOW TASKS, the row whose id is Task) and the
// lag of its stream: the largest lag_bytes of Slot's shard slots in SHOW
// REPLICATION_SLOTS, one per source shard, <Slot>_0 … <Slot>_<Shards-1>, unknown (-1) when
// one is missing (adapters.Resharder.SlotLag). Answer with CopyPolled.
type PollCopy struct {
	Step, Instance string
	Task           int64
	Slot           string
	Shards         int // source shards the copy reads, one slot each
}

// Pause asks one instance to hold new queries for Database (RouterInstance.Pause; PgDog:
// PAUSE <db>). They queue, they do not fail. Answer with Reply.
type Pause struct {
	Step, Instance, Database string
}

// Fence asks one shard's backend to stop Role from writing (ShardBackend.FenceWrites:
// ALTER ROLE <role> NOLOGIN, then pg_terminate_backend for the role's sessions, including
// sessions that SET ROLE to it, verified gone). Answer with Reply.
//
// Step 3 fences the shards of both layouts: the one traffic leaves (an instance the pause
// missed fails its writes there) and the one it moves to, which is opened (Unfence) only
// once the generation routing to it is stored. Replication streams (the copy into the
// destination, the stream back after CUTOVER) log in as another role and are not stopped.
type Fence struct {
	Step, Shard string
	Backend     shardmap.Backend
	Role        string
}

// Unfence asks one shard's backend to let Role log in again (ShardBackend.UnfenceWrites).
// Answer with Reply.
type Unfence struct {
	Step, Shard string
	Backend     shardmap.Backend
	Role        string
}

// Cutover asks the designated instance to cut over Task (PgDog: CUTOVER <task>): it drains,
// swaps the two databases' names in that instance's routing, starts the reverse stream and
// clears that instance's maintenance holds. Answer with Reply. The driver must not retry it
// on its own: on any error the machine asks ListTasks what happened.
//
// Before it sends CUTOVER the driver must wait for Drain: for every shard traffic leaves
// (the source shards forward, the destination's in a reverse), all of them fenced when the
// machine sends the command, until Task's stream has confirmed everything the shard's WAL
// held when the wait began (see SlotDrain). PgDog's own wait before its swap reads a lag
// it refreshes once a second, so a stale 0 let the swap go with acknowledged writes not
// yet applied on the other layout (adapters/pgdog package doc). If the wait fails or
// times out, CUTOVER is not sent and the Reply carries the error: the machine then lists
// d's tasks, finds the task still replicating and tries again (up to Attempts), then
// rolls back.
type Cutover struct {
	Step, Instance string
	Task           int64
	Drain          []SlotDrain
}

// ErrNotSent is wrapped by the error of a Cutover's Reply whose CUTOVER never left the
// driver, because the drain before it failed. The machine treats it as any failed answer
// (it lists d's tasks); the sentinel lets a reader of the trace tell a CUTOVER not sent
// from one whose answer was lost, which may still land.
var ErrNotSent = errors.New("CUTOVER was not sent")

// SlotDrain is one shard's part of a Cutover's drain: wait until every logical slot of
// Task's stream in Backend's database has confirmed_flush_lsn at or past the shard's
// pg_current_wal_insert_lsn(), read once at the start of the wait (after the fence, so
// nothing the application role writes can come after it).
//
// Slot is the name the copy was given (CopyData.Slot), not a slot's own name: how a
// router names the slots of a stream is its own business. PgDog 9918e963 makes one per
// source shard, <slot>_<i> (pgdog/src/backend/replication/logical/publisher/slot.rs,
// ReplicationSlot::replication), and its reverse stream, set up by the forward CUTOVER,
// reuses the orchestrator's slot name, so on destination shard j it is <slot>_<j> too
// (orchestrator.rs, refresh_publisher); the reference router (refrouter) makes one per
// pair of shards, <slot>_<i>_<j>, and its stream back <slot>_r<n>_<i>_<j>. So the slots
// of the stream on a shard are those of Backend's database (pg_replication_slots.database:
// test rigs put several shards' databases on one server) named Slot or starting with
// Slot+"_"; none at all is an error, never a drain that passed.
type SlotDrain struct {
	Shard   string
	Backend shardmap.Backend
	Slot    string
}

// ListTasks asks for every root task on the instance (SHOW TASKS, rows whose scope is
// root, each mapped with ClassifyTask). Answer with TasksListed.
type ListTasks struct {
	Step, Instance string
}

// WriteFiles asks for the files rendered from Record (kernel/render) to be written where
// every instance reads them on start (the ConfigMap, or the directory in development).
// Answer with Reply. It is sent only once Record is stored, so an instance that restarts at
// any moment afterwards routes by a published generation.
type WriteFiles struct {
	Step       string
	Generation uint64
	Record     *shardmap.Record
}

// Reload asks one instance to route by Generation: put the files rendered from Record
// where it reads them and RELOAD (RouterInstance.Apply). PgDog re-reads only the files it
// was started with, so the files come first. The designated instance is never reloaded
// after a CUTOVER: its routing was swapped in memory, and a reload would rebuild the pools
// the reverse stream uses. Answer with Reply.
type Reload struct {
	Step, Instance string
	Generation     uint64
	Record         *shardmap.Record
}

// Resume asks one instance to release what Pause held (RouterInstance.Resume; PgDog:
// RESUME <db>). Answer with Reply.
type Resume struct {
	Step, Instance, Database string
}

// StopTask asks the instance to stop Task (PgDog: STOP_TASK <task>, which for the reverse
// stream drops its slot). "task not found" is success: the task is gone either way. Answer
// with Reply.
type StopTask struct {
	Step, Instance string
	Task           int64
}

// Alert asks for an operator's attention; nothing is answered. The machine goes on (it
// keeps retrying, or has already taken the safe branch); Reason says what is wrong and what
// to look at.
type Alert struct {
	Step, Reason string
}

// Done reports the end of the cutover; nothing is answered and the machine ignores every
// later input. Generation is the record's generation at the end: hand it to ConfigPush (a
// finalize or a rollback stores a generation that drops the reshard destination, which the
// cutover does not push itself). Missed lists instances that did not pause, in either
// direction (the fence kept them off the layout traffic left), Lagging those that did not
// reload (they may still route by an older generation, to shards the fence keeps closed,
// until they restart or ConfigPush moves them; finalize keeps the source fenced) and Unresumed
// those that did not answer RESUME.
type Done struct {
	Outcome    Outcome
	Generation uint64
	Reason     string
	Missed     []string
	Lagging    []string
	Unresumed  []string
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At.
type SetTimer struct{ machine.SetTimer }

// CancelTimer asks the driver to drop a pending timer; a TimerFired that raced it is
// ignored by the machine.
type CancelTimer struct{ machine.CancelTimer }

// Outcome is how a cutover ended.
type Outcome uint8

const (
	// Finalized: the database serves the target layout (routed by generation g+1, stored
	// without the reshard destination at g+2, which Done names for ConfigPush), the reverse
	// stream is stopped and the retired shards' fence is cleared.
	Finalized Outcome = iota + 1
	// RolledBack: a failure before the point of no return; the database serves the source
	// layout (stored at generation g+1 without the reshard destination, which Done names
	// for ConfigPush), unfenced, every reachable instance resumed. The destination's shards
	// stay fenced if the fence reached them (an Alert names them; see Fence).
	RolledBack
	// Reversed: after the point of no return the operator chose Reverse; the database
	// serves the source layout at generation g+2 and the target's shards stay fenced.
	Reversed
	// Aborted: nothing was changed (the start request was invalid, or the record was not
	// the one the request named).
	Aborted
	// Halted: the machine cannot tell a safe way forward: someone moved the record to
	// another generation while the cutover was publishing. Instances stay paused and the
	// shards of both layouts stay fenced, so no write can be lost; an operator must decide
	// (Reason says what). Commands that merely keep failing never halt: they are retried with an Alert.
	Halted
)

var outcomeNames = []string{Finalized: "finalized", RolledBack: "rolled_back", Reversed: "reversed", Aborted: "aborted", Halted: "halted"}

func (o Outcome) String() string {
	if o != 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

func (WriteRecord) isCommand() {}
func (CopyData) isCommand()    {}
func (PollCopy) isCommand()    {}
func (Pause) isCommand()       {}
func (Fence) isCommand()       {}
func (Unfence) isCommand()     {}
func (Cutover) isCommand()     {}
func (ListTasks) isCommand()   {}
func (WriteFiles) isCommand()  {}
func (Reload) isCommand()      {}
func (Resume) isCommand()      {}
func (StopTask) isCommand()    {}
func (Alert) isCommand()       {}
func (Done) isCommand()        {}
func (SetTimer) isCommand()    {}
func (CancelTimer) isCommand() {}

func (c WriteRecord) String() string {
	r := c.Record
	return "WriteRecord step=" + c.Step + " expect=" + u(c.Expect) + " gen=" + u(r.Generation) + " phase=" + r.State.Phase.String() + stateSuffix(r)
}

func stateSuffix(r *shardmap.Record) string {
	s := ""
	if r.State.To != 0 {
		s += " to=" + u(r.State.To)
	}
	if r.State.Step != 0 {
		s += " at=" + r.State.Step.String()
	}
	return s
}

func (c CopyData) String() string {
	return "CopyData step=" + c.Step + " instance=" + c.Instance + " src=" + c.Source + " dst=" + c.Destination + " pub=" + c.Publication + " slot=" + c.Slot
}
func (c PollCopy) String() string {
	return "PollCopy step=" + c.Step + " instance=" + c.Instance + " task=" + i64(c.Task) + " slot=" + c.Slot + " shards=" + strconv.Itoa(c.Shards)
}
func (c Pause) String() string {
	return "Pause step=" + c.Step + " instance=" + c.Instance + " db=" + c.Database
}
func (c Fence) String() string {
	return "Fence step=" + c.Step + " shard=" + c.Shard + " backend=" + backendAddr(c.Backend) + " role=" + c.Role
}
func (c Unfence) String() string {
	return "Unfence step=" + c.Step + " shard=" + c.Shard + " backend=" + backendAddr(c.Backend) + " role=" + c.Role
}
func (c Cutover) String() string {
	s := "Cutover step=" + c.Step + " instance=" + c.Instance + " task=" + i64(c.Task)
	if len(c.Drain) > 0 {
		s += " drain="
		for i, d := range c.Drain {
			if i > 0 {
				s += ","
			}
			s += d.Shard + ":" + d.Slot
		}
	}
	return s
}
func (c ListTasks) String() string { return "ListTasks step=" + c.Step + " instance=" + c.Instance }
func (c WriteFiles) String() string {
	return "WriteFiles step=" + c.Step + " gen=" + u(c.Generation)
}
func (c Reload) String() string {
	return "Reload step=" + c.Step + " instance=" + c.Instance + " gen=" + u(c.Generation)
}
func (c Resume) String() string {
	return "Resume step=" + c.Step + " instance=" + c.Instance + " db=" + c.Database
}
func (c StopTask) String() string {
	return "StopTask step=" + c.Step + " instance=" + c.Instance + " task=" + i64(c.Task)
}
func (c Alert) String() string { return "Alert step=" + c.Step + " reason=" + c.Reason }
func (c Done) String() string {
	s := "Done outcome=" + c.Outcome.String() + " gen=" + u(c.Generation)
	if c.Reason != "" {
		s += " reason=" + c.Reason
	}
	for _, l := range []struct {
		k string
		v []string
	}{{"missed", c.Missed}, {"lagging", c.Lagging}, {"unresumed", c.Unresumed}} {
		if len(l.v) > 0 {
			s += " " + l.k + "=" + join(l.v)
		}
	}
	return s
}
func (c SetTimer) String() string    { return "SetTimer id=" + c.ID + " at=" + i64(c.At) }
func (c CancelTimer) String() string { return "CancelTimer id=" + c.ID }

func backendAddr(b shardmap.Backend) string {
	return b.Host + ":" + strconv.Itoa(int(b.Port)) + "/" + b.Database
}

func u(v uint64) string  { return strconv.FormatUint(v, 10) }
func i64(v int64) string { return strconv.FormatInt(v, 10) }

func join(v []string) string {
	s := "("
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += x
	}
	return s + ")"
}
