package cutover_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// world is a model of what the cutover drives: the store, the PgDog instances (routing,
// holds, tasks) and the shards' fences. It answers commands the way the real systems do
// and checks, after every effect, the invariants the cutover exists to keep. The
// interaction scripts and the properties both play the driver through it.
type world struct {
	g          uint64 // the generation the cutover starts from
	src, dst   []string
	instances  []string
	designated string

	store   *shardmap.Record
	files   uint64            // generation of the files on the shared volume
	filesOn string            // the layout those files route to
	fenced  map[string]bool   // shard -> fenced
	routes  map[string]string // instance -> "src" | "dst"
	// loaded is the layout "<db>" names in the files each instance last loaded (start,
	// restart, RELOAD). PgDog's CUTOVER swaps the names in that config and never keeps the
	// swapped one (pgdog/src/backend/databases.rs, cutover), so every CUTOVER routes an
	// instance to the other layout than its loaded files: a second CUTOVER without a RELOAD
	// in between routes it where the first did.
	loaded map[string]string
	paused map[string]bool
	// Queries routed already and held (checkout > 0 models them: PgDog's checkout_timeout,
	// in ms of the run's clock). PgDog's CUTOVER ends maintenance for the whole instance;
	// when its swap leaves the instance on the layout it routed by (the reverse CUTOVER: see
	// loaded), the clients it released are routed by that layout, fenced, and wait for its
	// schema to load (Cluster::wait_ready), which the fence keeps from happening, or at its
	// pools, which keep their pause (pool_impl.rs, move_conns_to). A RELOAD onto another
	// layout takes that cluster down and retries them there with their old shard index
	// (pgdog/src/backend/pool/connection/mod.rs, Connection::connect): on an open shard a
	// write lands on another shard than its hash; on a fenced one it waits for a login
	// until checkout_timeout refuses it (retrying), and lands if the shard opens first.
	checkout int64
	clock    *int64 // the run's clock (nil: 0)
	held     map[string]heldQuery
	retrying map[string]heldQuery // held queries a RELOAD retried on a fenced layout
	tasks    map[int64]cutover.TaskState
	// Task ids: PgDog numbers its tasks from 0 after a start (newWorld's firstTask), so the
	// world marks a task it has none of with noTask.
	slotTask  int64 // the task replicating into the deterministic slot
	nextTask  int64
	copyTask  int64
	stream    int64 // reverse stream started by the forward CUTOVER
	restream  int64 // stream started by the reverse CUTOVER
	cut, rcut bool  // the forward / reverse CUTOVER took effect
	written   int   // records the cutover stored
	foreign   bool  // someone else moved the record to another generation
	polls     int
	lag       int64 // lag reported once replicating
	syncPolls int   // polls spent syncing before replicating
	// inflight are the fence and hold commands sent and not yet executed (nor lost in a
	// crash of the driver), in the order they were sent.
	inflight []cutover.Command

	// The clients' writes: after every effect each instance that is not held writes once,
	// to the layout it routes to, if a shard of it takes the role. A write is on both
	// layouts once a stream from its layout to the other has applied it; one made while no
	// stream runs is stranded on its layout, lost if the database ends up serving the other
	// one. A stream applies its writes late (inStream): PgDog's CUTOVER can swap before its
	// stream applied the last ones (its wait reads a lag refreshed once a second), and the
	// swap ends that stream, so only a Cutover whose Drain covers every shard of the layout
	// traffic leaves, fenced, carries them over; without it they are stranded.
	acked    int
	stranded map[string]int
	inStream map[string]int
	// Pause rounds: each first-round Pause's step (without its attempt) and whether one of
	// its attempts took effect, and the rounds whose fence was sent (Missed must list every
	// instance such a round did not pause).
	pauses     map[string]string // base step -> instance
	paused1    map[string]bool   // base step -> took effect
	fenceRound map[string]bool   // step prefix before "fence/"
	fencedEver map[string]bool   // shard -> a Fence of it took effect
	failures   *check.Failures   // the failed answers the machine took (the property's driver feeds it)
	// lateCut: a CUTOVER landed after its failure had been answered (see landLate);
	// lateStream is the stream it started, which no answer ever named to the machine.
	lateCut    bool
	lateStream int64
	// checkFailed: the machine alerted that its check of d after the resume (listing d's
	// tasks, or reloading it) failed, so d may serve on the old files until finalize.
	checkFailed bool
	// otherDB: another database on d runs a replication task of its own (PgDog's SHOW
	// TASKS lists every database's tasks together), started once the copy is polled (the
	// machine knows its copy's id by then), so its id is above the copy's and it is
	// active; otherTask is its id (noTask: none yet).
	otherDB   bool
	otherTask int64
	// otherEarly: the other database's task is a copy of its own, started right after this
	// cutover's COPY_DATA ran (before anything is polled), so a restart's listing shows it
	// beside the copy, newer. kinds is SHOW TASKS's type column of every task (cutover.Task
	// Kind); a task the world has none for is listed with "".
	otherEarly bool
	// otherLate: the other database's task is a copy of its own started on d at this
	// cutover's forward CUTOVER, so the listing that resolves it shows that copy newer than
	// the stream the CUTOVER started (without otherDB's copy started at the first poll).
	otherLate bool
	// otherKind, when set, is the type SHOW TASKS gives the other database's task in place
	// of its copy's ("reshard other -> other__reshard_9").
	otherKind string
	kinds     map[int64]string
	// noKinds: the lister says nothing of any task's type (Kind "" throughout, as before
	// SHOW TASKS's type was read), so the machine tells the stream by its id alone.
	noKinds bool
	// slotLagSyncing: SHOW REPLICATION_SLOTS shows the copy's slot while the copy still
	// syncs (PgDog creates it when COPY_DATA starts), with the lag it holds so far; without
	// it the world reports an unknown lag (-1) until the task replicates.
	slotLagSyncing bool
	// stuckLag: the stream is slower than the writes, so the copy's lag never falls.
	stuckLag bool
	// answers is what the world answered each PAUSE, RELOAD and RESUME step (by its step
	// id without the attempt), for check.Claims.
	answers map[string]check.Answered
	// alerts counts the Alerts the machine raised. A task the cutover leaves running,
	// whether it knew its id or not (a COPY_DATA whose answer was lost), needs an Alert.
	alerts int

	violations []string
}

// copyOf is how PgDog names this cutover's copy in SHOW TASKS: "<db> -> <db>__reshard_<g>".
func (w *world) copyOf() string {
	db := w.store.Router.Name
	return db + " -> " + db + "__reshard_" + strconv.FormatUint(w.g, 10)
}

// startOther starts the other database's task (see otherDB), a copy of its own.
func (w *world) startOther(st cutover.TaskState) {
	w.otherTask = w.nextTask
	w.tasks[w.otherTask] = st
	w.kinds[w.otherTask] = cmp.Or(w.otherKind, "reshard other -> other__reshard_9")
	w.nextTask++
}

// noTask is the world's "no such task": PgDog's ids are never negative.
const noTask = -1

// heldQuery is a query an instance routed by layout, held since at.
type heldQuery struct {
	layout string
	at     int64
}

func (w *world) now() int64 {
	if w.clock == nil {
		return 0
	}
	return *w.clock
}

// newWorld models instances whose PgDog hands out task ids from firstTask (a freshly
// started PgDog: 0).
func newWorld(rec *shardmap.Record, instances []string, designated string, firstTask int64) *world {
	w := &world{
		slotTask: noTask, copyTask: noTask, stream: noTask, restream: noTask, lateStream: noTask, otherTask: noTask,
		g: rec.Generation, instances: instances, designated: designated,
		store: rec.Clone(), files: rec.Generation, filesOn: "src",
		fenced: map[string]bool{}, routes: map[string]string{}, loaded: map[string]string{}, paused: map[string]bool{},
		tasks: map[int64]cutover.TaskState{}, nextTask: firstTask, stranded: map[string]int{}, inStream: map[string]int{}, kinds: map[int64]string{}, answers: map[string]check.Answered{},
		pauses: map[string]string{}, paused1: map[string]bool{}, fenceRound: map[string]bool{}, fencedEver: map[string]bool{},
		failures: check.NewFailures(),
		held:     map[string]heldQuery{}, retrying: map[string]heldQuery{},
	}
	for _, s := range rec.Shards {
		w.src = append(w.src, s.Name)
	}
	for _, s := range rec.Target.Shards {
		w.dst = append(w.dst, s.Name)
	}
	for _, i := range instances {
		w.routes[i], w.loaded[i] = "src", "src"
	}
	return w
}

func (w *world) violate(format string, a ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, a...))
}

func (w *world) layoutOf(r *shardmap.Record) string {
	if slices.ContainsFunc(r.Shards, func(s shardmap.Shard) bool { return slices.Contains(w.dst, s.Name) }) {
		return "dst"
	}
	return "src"
}

func (w *world) shards(l string) []string {
	if l == "dst" {
		return w.dst
	}
	return w.src
}

// live reports whether some instance routes to layout l and some shard of l takes writes.
func (w *world) live(l string) bool {
	routed := false
	for _, i := range w.instances {
		routed = routed || w.routes[i] == l
	}
	return routed && slices.ContainsFunc(w.shards(l), func(s string) bool { return !w.fenced[s] })
}

// checkSplit is the fence's reason to exist: never can writes reach both layouts. It also
// lets the clients write (see traffic).
func (w *world) checkSplit(after string) {
	if w.live("src") && w.live("dst") {
		w.violate("split brain after %s: routes=%v fenced=%v", after, w.routes, w.fenced)
	}
	w.traffic(after)
}

func other(l string) string {
	if l == "dst" {
		return "src"
	}
	return "dst"
}

// streams reports whether a stream carries writes from layout l to the other one: the
// copy (from the source, until its CUTOVER finishes it or it is stopped), the stream the
// forward CUTOVER started (from the new shards back), the one the reverse CUTOVER started.
func (w *world) streams(l string) bool {
	run := func(id int64) bool {
		st, ok := w.tasks[id]
		return id != noTask && ok && (st == cutover.TaskSyncing || st == cutover.TaskReplicating)
	}
	if l == "src" {
		return run(w.copyTask) || run(w.restream)
	}
	return run(w.stream)
}

// traffic lets every instance that is not held write once through its routing. A write to
// a layout no generation routing to it is stored for is what the fence of both layouts at
// step 3 exists to refuse: until the publish, a rollback can still leave it behind.
func (w *world) traffic(after string) {
	for _, i := range w.instances {
		l := w.routes[i]
		if w.paused[i] || !slices.ContainsFunc(w.shards(l), func(s string) bool { return !w.fenced[s] }) {
			continue
		}
		w.acked++
		if pub := w.layoutOf(w.store); pub != l {
			w.violate("%s writes reach the %s layout after %s, which no stored generation routes to (the store routes to %s at generation %d): fenced=%v",
				i, l, after, pub, w.store.Generation, w.fenced)
		}
		if w.streams(l) {
			w.inStream[l]++
		} else {
			w.stranded[l]++
		}
	}
}

// cutFrom is the layout the stream c cuts over carries writes from: the copy's (the
// source), or the forward CUTOVER's stream's (the destination); else where d routes.
func (w *world) cutFrom(c cutover.Cutover) string {
	switch {
	case c.Task == w.copyTask:
		return "src"
	case c.Task == w.stream && w.stream != noTask:
		return "dst"
	}
	return w.routes[c.Instance]
}

// drains reports whether c's Drain names every shard of layout l (the driver waits for it
// before it sends CUTOVER; checkDrain checks, when the machine sends it, that each is
// fenced).
func drains(c cutover.Cutover, shards []string) (missing string, ok bool) {
	for _, s := range shards {
		if !slices.ContainsFunc(c.Drain, func(d cutover.SlotDrain) bool { return d.Shard == s && d.Slot != "" }) {
			return s, false
		}
	}
	return "", true
}

// checkDrain: a CUTOVER is sent only with a drain of every shard of the layout traffic
// leaves, each fenced already, so that the point the drain waits for comes after the
// application's last write there.
func (w *world) checkDrain(c cutover.Cutover) {
	l := w.cutFrom(c)
	if s, ok := drains(c, w.shards(l)); !ok {
		w.violate("%s sent without draining shard %s of the %s layout: PgDog may swap before its stream applied the last writes", c, s, l)
		return
	}
	for _, s := range w.shards(l) {
		if !w.fenced[s] {
			w.violate("%s drains shard %s while it is not fenced: writes after the drain's point are not waited for", c, s)
		}
	}
}

// drain is what comes before a CUTOVER's swap: the stream from layout l applies what it
// holds if the Cutover drained every shard of l (the driver waited for it), and what it
// has not applied is stranded on l otherwise (the swap ends the stream).
func (w *world) drain(c cutover.Cutover) {
	l := w.cutFrom(c)
	if !w.streams(l) {
		return
	}
	if _, ok := drains(c, w.shards(l)); ok {
		w.stranded[l] = 0
	} else {
		w.stranded[l] += w.inStream[l]
	}
	w.inStream[l] = 0
}

// holdOf names the switch a command turns and which way: a shard's fence (Fence on,
// Unfence off) or an instance's maintenance hold (Pause on; Resume, and CUTOVER, which
// clears every hold on its instance, off).
func holdOf(c cutover.Command) (target string, on, ok bool) {
	switch c := c.(type) {
	case cutover.Fence:
		return "shard " + c.Shard, true, true
	case cutover.Unfence:
		return "shard " + c.Shard, false, true
	case cutover.Pause:
		return "instance " + c.Instance, true, true
	case cutover.Resume:
		return "instance " + c.Instance, false, true
	case cutover.Cutover:
		return "instance " + c.Instance, false, true
	}
	return "", false, false
}

// send records a command the machine issued. Two commands that turn one switch opposite
// ways must never be in flight together: commands in flight run in any order (a call
// that timed out can still run on the server after a later one), so the one sent first
// may land last and undo the one the machine meant to be the last word.
func (w *world) send(c cutover.Command) {
	if c, ok := c.(cutover.StopTask); ok && c.Task == w.stream && w.stream != noTask && !w.checkFailed && !w.lateCut {
		// Finalize begins: the serving period ends. d must have served it on the layout
		// the stored generation routes to; a d that restarted before the files of g+1 were
		// written routes by the files of g unless the machine reloaded it. (A CUTOVER that
		// landed after its failure was answered, outside the driver's contract, can swap d
		// without the machine knowing: the fence keeps that safe, not this.)
		if l := w.layoutOf(w.store); w.routes[c.Instance] != l {
			w.violate("serving ended with the designated instance %s routing to the old layout %s (the store routes to %s): it restarted after its CUTOVER and was not reloaded", c.Instance, w.routes[c.Instance], l)
		}
	}
	if c, ok := c.(cutover.Cutover); ok {
		w.checkDrain(c)
	}
	t, on, ok := holdOf(c)
	if !ok {
		return
	}
	for _, p := range w.inflight {
		if pt, pon, _ := holdOf(p); pt == t && pon != on {
			w.violate("%s sent while %s is in flight on %s: whichever runs last wins", c, p, t)
		}
	}
	w.inflight = append(w.inflight, c)
	switch c := c.(type) {
	case cutover.Pause:
		if b := baseStep(c.Step); strings.Contains(b, "/pause/") {
			w.pauses[b] = c.Instance
		}
	case cutover.Fence:
		if i := strings.Index(c.Step, "fence/"); i >= 0 {
			w.fenceRound[c.Step[:i]] = true
		}
	}
}

// alert notes what the machine said it could not do.
func (w *world) alert(a cutover.Alert) {
	w.alerts++
	w.report(check.FenceKeptAlert(0, a.Reason, w.answers))
	if strings.Contains(a.Step, "/check/") && strings.Contains(a.Reason, "failed") {
		w.checkFailed = true
	}
}

// settle forgets a command in flight: it ran, or failed for good.
func (w *world) settle(c cutover.Command) {
	s := c.String()
	for i, p := range w.inflight {
		if p.String() == s {
			w.inflight = slices.Delete(w.inflight, i, i+1)
			return
		}
	}
}

// crash forgets every command in flight: the driver died; each one ran before it did, or
// never will.
func (w *world) crash() { w.inflight = nil }

// apply executes a command's effect on the world and returns the answer the driver
// feeds back. fail makes the command fail; applied says whether a failed command took
// effect anyway (the reply was lost, or it failed half-way).
func (w *world) apply(c cutover.Command, fail error, applied bool) cutover.Input {
	w.answered(c, fail)
	return w.effect(c, fail, applied)
}

// ranUnanswered executes a command whose answer the machine never gets (the driver
// crashed first): check.Claims does not count it as answered.
func (w *world) ranUnanswered(c cutover.Command) { w.effect(c, nil, false) }

func (w *world) effect(c cutover.Command, fail error, applied bool) cutover.Input {
	w.settle(c)
	effect := fail == nil || applied
	switch c := c.(type) {
	case cutover.WriteRecord:
		if fail != nil {
			if applied && c.Expect == w.store.Version {
				w.writeRecord(c)
			}
			return cutover.RecordWritten{Step: c.Step, Err: fail}
		}
		if c.Expect != w.store.Version {
			return cutover.RecordWritten{Step: c.Step, Conflict: w.store.Clone(), Err: errors.New("conflict")}
		}
		w.writeRecord(c)
		return cutover.RecordWritten{Step: c.Step, Version: w.store.Version}
	case cutover.CopyData:
		if effect && !(w.slotTask != noTask && w.tasks[w.slotTask] != cutover.TaskCancelled) {
			w.copyTask, w.slotTask = w.nextTask, w.nextTask
			w.tasks[w.copyTask] = cutover.TaskSyncing
			w.kinds[w.copyTask] = "reshard " + w.copyOf()
			w.nextTask++
			w.stranded["src"], w.inStream["src"] = 0, 0 // the initial copy carries every row
			if w.otherEarly {
				w.startOther(cutover.TaskSyncing)
			}
		}
		return cutover.CopyStarted{Step: c.Step, Task: w.slotTask, Err: fail}
	case cutover.PollCopy:
		if fail != nil {
			return cutover.CopyPolled{Step: c.Step, Err: fail}
		}
		if w.otherDB && !w.otherLate && w.otherTask == noTask {
			w.startOther(cutover.TaskReplicating)
		}
		st := w.tasks[c.Task]
		if st == cutover.TaskSyncing {
			w.polls++
			if w.polls > w.syncPolls {
				st = cutover.TaskReplicating
				w.tasks[c.Task] = st
			}
		}
		lag := int64(-1)
		if st == cutover.TaskSyncing && w.slotLagSyncing {
			lag = w.lag
		}
		if st == cutover.TaskReplicating {
			lag = w.lag
			if !w.stuckLag {
				w.lag /= 2 // catching up
			}
		}
		return cutover.CopyPolled{Step: c.Step, Task: cutover.Task{ID: c.Task, State: st}, LagBytes: lag}
	case cutover.ListTasks:
		if fail != nil {
			return cutover.TasksListed{Step: c.Step, Err: fail}
		}
		var ts []cutover.Task
		for id, st := range w.tasks {
			kind := w.kinds[id]
			if w.noKinds {
				kind = ""
			}
			ts = append(ts, cutover.Task{ID: id, State: st, Kind: kind})
		}
		slices.SortFunc(ts, func(a, b cutover.Task) int { return int(a.ID - b.ID) })
		return cutover.TasksListed{Step: c.Step, Tasks: ts}
	case cutover.Pause:
		w.paused[c.Instance] = w.paused[c.Instance] || effect
		if effect {
			w.paused1[baseStep(c.Step)] = true
		}
	case cutover.Resume:
		if effect {
			w.checkResume(c.Instance)
			w.paused[c.Instance] = false
		}
	case cutover.Fence:
		if effect {
			w.fenced[c.Shard] = true
			w.fencedEver[c.Shard] = true
		}
	case cutover.Unfence:
		if effect {
			w.fenced[c.Shard] = false
			w.landRetried(c.Shard)
		}
	case cutover.Cutover:
		if effect && !w.cutover(c) && fail == nil {
			fail = errors.New("task is not a replication task")
		}
	case cutover.WriteFiles:
		if effect {
			if c.Generation > w.store.Generation {
				w.violate("files for generation %d written while the store has %d", c.Generation, w.store.Generation)
			}
			w.files, w.filesOn = c.Generation, w.layoutOf(c.Record)
		}
	case cutover.Reload:
		if effect {
			w.retryHeld(c.Instance, w.layoutOf(c.Record))
			w.routes[c.Instance] = w.layoutOf(c.Record)
			w.loaded[c.Instance] = w.routes[c.Instance]
		}
	case cutover.StopTask:
		if effect && c.Task == w.otherTask && w.otherTask != noTask {
			w.violate("STOP_TASK %d on %s stops another database's replication task", c.Task, c.Instance)
		}
		if effect {
			if st, ok := w.tasks[c.Task]; ok && st != cutover.TaskFinished {
				w.tasks[c.Task] = cutover.TaskCancelled
			}
		}
	default:
		return nil
	}
	w.checkSplit(c.String())
	return cutover.Reply{Step: stepOf(c), Err: fail}
}

func (w *world) writeRecord(c cutover.WriteRecord) {
	next := c.Record
	if next.Generation < w.store.Generation {
		w.violate("generation goes back from %d to %d", w.store.Generation, next.Generation)
	}
	// What every ShardMapStore checks inside its compare-and-set (adapters.CheckCAS).
	if err := next.Validate(); err != nil {
		w.violate("invalid record written: %v", err)
	} else if err := next.ValidateNext(w.store); err != nil {
		w.violate("record refused by the store: %v", err)
	}
	if from, to := w.layoutOf(w.store), w.layoutOf(next); from != to {
		w.report(check.Publish(check.Move{Generation: next.Generation, Reverse: to == "src", Leaves: w.shards(from),
			Fenced: w.isFenced, Cut: to == "dst" && w.cut || to == "src" && w.rcut, Designated: w.designated}))
	}
	r := next.Clone()
	r.Version = w.store.Version + 1
	w.store = r
	w.written++
}

// checkResume: an instance resumes only onto a published layout whose shards take writes.
func (w *world) checkResume(inst string) {
	r := check.Resumed{Instance: inst, Stored: w.store.Generation, Serves: w.shards(w.layoutOf(w.store)), Fenced: w.isFenced}
	// (A CUTOVER that landed late may have taken effect without the machine knowing:
	// resuming the others onto the source it rolls back to is then right.)
	if w.cut && !w.rcut && w.store.Generation < w.g+1 && !w.lateCut {
		r.Unpublished = w.g + 1
	}
	w.report(check.Resume(r))
}

func (w *world) isFenced(s string) bool { return w.fenced[s] }

// report records a violation of the checkers the world shares with the simulator.
func (w *world) report(v *detsim.Violation) {
	if v != nil {
		w.violate("%s", v.Detail)
	}
}

// cutover models PgDog's CUTOVER on one instance: route to the other layout than the files
// it loaded (see loaded), start the reverse stream, clear the instance's holds.
func (w *world) cutover(c cutover.Cutover) bool {
	st, ok := w.tasks[c.Task]
	if !ok || st != cutover.TaskReplicating {
		return false // "task is not a replication task"
	}
	if c.Task == w.otherTask {
		// The other database's copy: PgDog swaps that database's names, not this one's,
		// and clears every hold on the instance (the other's reverse stream is not modelled).
		w.violate("CUTOVER %d on %s cuts over another database's task", c.Task, c.Instance)
		w.tasks[c.Task] = cutover.TaskFinished
		w.paused[c.Instance] = false
		return true
	}
	w.drain(c)
	w.tasks[c.Task] = cutover.TaskFinished
	id := w.nextTask
	w.nextTask++
	w.tasks[id] = cutover.TaskReplicating
	w.kinds[id] = "replication " + w.copyOf() + " (reverse)"
	switch {
	case c.Task == w.copyTask:
		w.cut, w.stream = true, id
		if w.otherLate && w.otherTask == noTask {
			w.startOther(cutover.TaskReplicating)
		}
	case c.Task == w.stream:
		w.rcut, w.restream = true, id
	}
	before := w.routes[c.Instance]
	w.routes[c.Instance] = w.swapped(c.Instance)
	if w.checkout > 0 && w.paused[c.Instance] && w.routes[c.Instance] == before {
		w.held[c.Instance] = heldQuery{layout: before, at: w.now()}
	}
	w.paused[c.Instance] = false
	return true
}

// retryHeld is a RELOAD of inst onto layout l taking down the cluster its held query
// waits on: PgDog retries it on l with the shard index its own layout gave it.
func (w *world) retryHeld(inst, l string) {
	h, ok := w.held[inst]
	if !ok || l == h.layout {
		return
	}
	delete(w.held, inst)
	if slices.ContainsFunc(w.shards(l), func(s string) bool { return !w.fenced[s] }) {
		w.misplaced(inst, h.layout, l, "at its RELOAD")
		return
	}
	w.retrying[inst] = heldQuery{layout: l, at: w.now()}
}

// landRetried: shard s opened. A retried query still waiting for a login there (not yet
// refused at checkout_timeout) gets it.
func (w *world) landRetried(s string) {
	for inst, r := range w.retrying {
		if !slices.Contains(w.shards(r.layout), s) {
			continue
		}
		delete(w.retrying, inst)
		if w.now()-r.at < w.checkout {
			w.misplaced(inst, other(r.layout), r.layout, fmt.Sprintf("%d ms after its RELOAD, when shard %s opened", w.now()-r.at, s))
		}
	}
}

func (w *world) misplaced(inst, routedBy, on, when string) {
	w.violate("a query %s routed by the %s layout and held since its CUTOVER is retried on the %s layout with the shard index the %s layout gave it, %s (checkout_timeout %d ms): a write on another shard than its hash",
		inst, routedBy, on, routedBy, when, w.checkout)
}

// swapped is where a CUTOVER on inst routes it: the other layout than its loaded files.
func (w *world) swapped(inst string) string {
	if w.loaded[inst] == "dst" {
		return "src"
	}
	return "dst"
}

// restartInstance is an instance's process restarting: it routes by the files on the
// volume (whatever a CUTOVER or RELOAD did in memory is gone), holds nothing, and the
// tasks it ran (the copy, the streams a CUTOVER started) are gone with it.
func (w *world) restartInstance(inst string) {
	w.routes[inst], w.loaded[inst], w.paused[inst] = w.filesOn, w.filesOn, false
	delete(w.held, inst)
	delete(w.retrying, inst)
	if inst == w.designated {
		for id, st := range w.tasks {
			if st == cutover.TaskSyncing || st == cutover.TaskReplicating {
				delete(w.tasks, id)
			}
		}
	}
	w.checkSplit("restart of " + inst)
}

// landLate runs a CUTOVER whose failure was answered already: its request arrived after
// the caller gave up (outside the driver's contract, which answers only once an attempt
// has taken effect or never will, but a network can do it). Its answer goes nowhere.
func (w *world) landLate(c cutover.Cutover) {
	w.lateCut = true
	next := w.nextTask
	w.apply(c, nil, false)
	if w.nextTask > next {
		w.lateStream = next
	}
}

// swapAndFail models a CUTOVER that swapped routing past its point of no return and then
// failed: the task is marked failed and no stream started.
func (w *world) swapAndFail(c cutover.Cutover) {
	w.settle(c)
	if st := w.tasks[c.Task]; st != cutover.TaskReplicating {
		return
	}
	w.drain(c) // the drain comes before the swap
	w.tasks[c.Task] = cutover.TaskFailed
	w.routes[c.Instance] = w.swapped(c.Instance)
	w.paused[c.Instance] = false
	w.checkSplit("a failed CUTOVER")
}

// answered records the answer to a PAUSE, RELOAD or RESUME attempt for check.Claims.
func (w *world) answered(c cutover.Command, fail error) {
	var inst, kind string
	switch c := c.(type) {
	case cutover.Pause:
		inst, kind = c.Instance, check.KindPause
	case cutover.Reload:
		inst, kind = c.Instance, check.KindReload
	case cutover.Resume:
		inst, kind = c.Instance, check.KindResume
	default:
		return
	}
	b := baseStep(stepOf(c))
	w.answers[b] = check.Answered{Instance: inst, Kind: kind, OK: w.answers[b].OK || fail == nil}
}

// checkEnd checks the world against the outcome the machine reported.
func (w *world) checkEnd(d cutover.Done) {
	w.report(check.Claims(0, d, w.answers))
	if d.Outcome == cutover.Finalized || d.Outcome == cutover.RolledBack || d.Outcome == cutover.Reversed {
		for _, i := range w.instances {
			if w.paused[i] && !slices.Contains(d.Unresumed, i) {
				w.violate("%v but %s is left paused and not listed unresumed", d.Outcome, i)
			}
		}
	}
	if d.Outcome != cutover.Aborted && d.Outcome != cutover.Halted {
		if l := other(w.layoutOf(w.store)); w.stranded[l] > 0 {
			w.violate("%v: %d acknowledged writes lost: taken on the %s layout while no stream carried them to the one the database serves now",
				d.Outcome, w.stranded[l], l)
		}
	}
	var bases []string
	for b := range w.pauses {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	for _, b := range bases {
		round := b[:strings.Index(b, "pause/")]
		if i := w.pauses[b]; w.fenceRound[round] && !w.paused1[b] && !slices.Contains(d.Missed, i) {
			w.violate("%v: %s never paused in round %q, which went on to fence, but Done.Missed is %v", d.Outcome, i, round, d.Missed)
		}
	}
	if d.Outcome == cutover.Finalized || d.Outcome == cutover.RolledBack || d.Outcome == cutover.Reversed {
		// Every task the cutover started ends with it: the copy (rolled back), the stream
		// of the last CUTOVER (finalized, reversed), and a copy whose COPY_DATA answer was
		// lost, so the machine never learnt its id. One left running goes on replicating
		// into a layout nobody serves, and holds its slot on the source: only an Alert that
		// tells the operator to stop it excuses it. (The stream of a CUTOVER that landed
		// after its failure was answered, outside the driver's contract, is not checked.)
		for id, st := range w.tasks {
			if (st == cutover.TaskSyncing || st == cutover.TaskReplicating) && id != w.lateStream && id != w.otherTask && w.alerts == 0 {
				w.violate("%v: task %d is left %v on %s and no Alert says so", d.Outcome, id, st, w.designated)
			}
		}
	}
	if v := check.FencesAtDone(w.now(), d, w.fences(w.src), w.fences(w.dst)); v != nil {
		w.violate("%s: %s", v.Invariant, v.Detail)
	}
	switch d.Outcome {
	case cutover.Finalized:
		w.expectRecord(d, w.g+2, shardmap.Serving)
	case cutover.RolledBack:
		w.expectRecord(d, w.g+1, shardmap.Serving)
		if w.layoutOf(w.store) != "src" {
			w.violate("rolled back but the record routes to the new layout")
		}
		if w.cut && !w.lateCut && w.copyTask != noTask && w.tasks[w.copyTask] == cutover.TaskFinished {
			// Its listing says it took, and nothing can be rolled back from there: the
			// reverse stream carries what d writes on the new layout back to the old one.
			w.violate("rolled back after the CUTOVER took effect (task %d listed finished)", w.copyTask)
		}
		if w.routes[w.designated] != "src" && !w.lateCut {
			// A CUTOVER that landed late may have swapped it again: it stays on the
			// fenced destination until ConfigPush reloads it with Done's generation.
			w.violate("rolled back but %s routes to the new shards", w.designated)
		}
	case cutover.Reversed:
		w.expectRecord(d, w.g+2, shardmap.Serving)
		if l := w.layoutOf(w.store); w.routes[w.designated] != l && !w.lateCut && !w.checkFailed && !slices.Contains(d.Lagging, w.designated) {
			// A d that restarted after the reverse CUTOVER, before the files of g+2, routes
			// by those of g+1, to the new shards the reverse left fenced.
			w.violate("reversed but the designated instance %s routes to the %s layout (the store routes to %s): it was not reloaded after the reverse CUTOVER, which routes it by the files it loaded, or it restarted before the files of the reverse were written", w.designated, w.routes[w.designated], l)
		}
	case cutover.Aborted:
		if w.written > 0 && !w.foreign || w.cut || slices.ContainsFunc(w.src, func(s string) bool { return w.fenced[s] }) {
			w.violate("aborted but the world changed: %d records written, cut %v, fenced %v", w.written, w.cut, w.fenced)
		}
	}
}

func (w *world) expectRecord(d cutover.Done, gen uint64, phase shardmap.Phase) {
	if w.foreign {
		return // the record is someone else's now; the machine alerted
	}
	if w.store.Generation != gen || d.Generation != gen {
		w.violate("%v: store generation %d, done says %d, want %d", d.Outcome, w.store.Generation, d.Generation, gen)
	}
	if w.store.State.Phase != phase {
		w.violate("%v: record phase %v, want %v", d.Outcome, w.store.State.Phase, phase)
	}
}

// fences is the shards' fences as the world has them, for check.FencesAtDone.
func (w *world) fences(shards []string) []check.FenceState {
	out := make([]check.FenceState, len(shards))
	for i, s := range shards {
		out[i] = check.FenceState{Shard: s, Fenced: w.fenced[s], Ever: w.fencedEver[s]}
	}
	return out
}

// stepOf returns a command's step id ("" for commands without one).
func stepOf(c cutover.Command) string {
	switch c := c.(type) {
	case cutover.WriteRecord:
		return c.Step
	case cutover.CopyData:
		return c.Step
	case cutover.PollCopy:
		return c.Step
	case cutover.Pause:
		return c.Step
	case cutover.Fence:
		return c.Step
	case cutover.Unfence:
		return c.Step
	case cutover.Cutover:
		return c.Step
	case cutover.ListTasks:
		return c.Step
	case cutover.WriteFiles:
		return c.Step
	case cutover.Reload:
		return c.Step
	case cutover.Resume:
		return c.Step
	case cutover.StopTask:
		return c.Step
	}
	return ""
}

// inputStep returns the step id an answer carries ("" for inputs without one).
func inputStep(in cutover.Input) string {
	switch in := in.(type) {
	case cutover.Reply:
		return in.Step
	case cutover.RecordWritten:
		return in.Step
	case cutover.CopyStarted:
		return in.Step
	case cutover.CopyPolled:
		return in.Step
	case cutover.TasksListed:
		return in.Step
	}
	return ""
}

// baseStep is the step an attempt's step id belongs to: without its "#n".
func baseStep(s string) string {
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		return s[:i]
	}
	return s
}

// fixture is a PgDog database "app" at generation 4, resharding from two shards to four.
func fixture() *shardmap.Record {
	be := func(host string) shardmap.Backend {
		return shardmap.Backend{Host: host, Port: 5432, Database: "app"}
	}
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r := shardmap.NewPgHash("app", key, be("10.0.1.1"), be("10.0.1.2"))
	r.Version, r.Generation = 12, 4
	t := shardmap.NewPgHash("app", key, be("10.0.2.1"), be("10.0.2.2"), be("10.0.2.3"), be("10.0.2.4")).Layout
	for i := range t.Shards {
		t.Shards[i].Name = fmt.Sprintf("n%d", i)
	}
	r.Target = &t
	r.State = shardmap.State{Phase: shardmap.Resharding, To: 5}
	return r
}
