package cutover

import (
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Spec is the TLA+ spec the machine's events belong to.
const Spec = "Cutover"

// Machine is one cutover of one database. It holds state only: no clients, no clock.
type Machine struct {
	s   state
	out []Command
}

// New returns an idle machine; feed it Start.
func New() *Machine { return &Machine{} }

// On consumes one input and returns the commands to execute. Inputs that do not belong to
// the current step (a late answer, a duplicate, a timer that raced its cancel) change
// nothing and return nothing.
func (m *Machine) On(ctx *machine.Ctx, in Input) []Command {
	m.out = nil
	if m.s.Stage == stDone {
		if _, ok := in.(Restarted); ok {
			m.emitDone(ctx) // the Done of the last run may not have reached the driver
		}
		return m.take()
	}
	switch in := in.(type) {
	case Start:
		m.start(ctx, in)
	case Restarted:
		m.restart(ctx)
	case Reply:
		m.onReply(ctx, in.Step, in.Err)
	case RecordWritten:
		m.onRecord(ctx, in)
	case CopyStarted:
		m.onCopyStarted(ctx, in)
	case CopyPolled:
		m.onPolled(ctx, in)
	case TasksListed:
		m.onTasks(ctx, in)
	case TimerFired:
		m.onTimer(ctx, in.ID)
	case Finalize:
		m.decide(ctx, decFinalize)
	case Reverse:
		m.decide(ctx, decReverse)
	}
	return m.take()
}

func (m *Machine) take() []Command {
	out := m.out
	m.out = nil
	return out
}

// Done reports whether the cutover has ended, and how.
func (m *Machine) Done() (Outcome, bool) { return m.s.Outcome, m.s.Stage == stDone }

// Generation is the routing generation the machine knows to be stored.
func (m *Machine) Generation() uint64 {
	if m.s.Rec == nil {
		return 0
	}
	return m.s.Rec.Generation
}

// ---- start ----

func (m *Machine) start(ctx *machine.Ctx, in Start) {
	if m.s.Stage != stIdle {
		return
	}
	in.Plan.Options = in.Plan.Options.withDefaults()
	m.s.Plan = in.Plan
	m.s.Plan.Instances = append([]string(nil), in.Plan.Instances...)
	m.s.Origin = in.Record.Clone()
	m.s.Rec = in.Record.Clone()
	if reason := checkStart(in); reason != "" {
		if m.s.Origin == nil {
			m.s.Origin, m.s.Rec = &shardmap.Record{}, &shardmap.Record{}
		}
		m.finish(ctx, Aborted, reason)
		return
	}
	r := m.s.Origin
	ctx.Emit(Spec, "Start", machine.S("db", r.Router.Name), machine.U("gen", r.Generation),
		machine.U("to", r.State.To), machine.S("designated", in.Plan.Designated),
		machine.I("instances", int64(len(in.Plan.Instances))))
	m.enter(ctx, stBegin)
}

func checkStart(in Start) string {
	r, p := in.Record, in.Plan
	switch {
	case r == nil:
		return "start: no record"
	case r.Router.Kind != shardmap.PgDog:
		return "start: " + r.Router.Name + " is not a PgDog database; Vitess keyspaces cut over with Vitess's own SwitchTraffic"
	case r.State.Phase != shardmap.Resharding || r.Target == nil:
		return "start: record phase is " + r.State.Phase.String() + "; a cutover starts from resharding with a target (push the target first)"
	case r.State.To != r.Generation+1:
		return "start: record moves from generation " + u(r.Generation) + " to " + u(r.State.To) + "; a cutover publishes exactly the next generation"
	case p.Role == "":
		return "start: no application role to fence"
	case p.Publication == "" || !lowerName(p.Publication):
		return "start: publication " + strconv.Quote(p.Publication) + " must be a lower-case name (PgDog lowercases admin commands)"
	case len(shardSlot(r, max(len(r.Shards), len(r.Target.Shards))-1)) > 63:
		return "start: slot name " + shardSlot(r, max(len(r.Shards), len(r.Target.Shards))-1) + " (PgDog makes one slot per shard a stream reads from, " + slotName(r) + "_<shard>, the reverse stream's on the destination's shards) is longer than 63 bytes; use a shorter database name"
	case len(p.Instances) == 0:
		return "start: no instances"
	}
	if err := r.Validate(); err != nil {
		return "start: record is invalid: " + err.Error()
	}
	for _, l := range []*shardmap.Layout{&r.Layout, r.Target} {
		for _, s := range l.Shards {
			if strings.Contains(s.Name, "#") {
				return "start: shard name " + strconv.Quote(s.Name) + " contains '#', which step ids use to number attempts; rename the shard"
			}
		}
	}
	if reason := checkServers(r, p.Role); reason != "" {
		return reason
	}
	seen := make(map[string]bool, len(p.Instances))
	for _, i := range p.Instances {
		if i == "" || seen[i] {
			return "start: instance " + strconv.Quote(i) + " is empty or listed twice"
		}
		if strings.Contains(i, "#") {
			return "start: instance " + strconv.Quote(i) + " contains '#', which step ids use to number attempts; rename the instance"
		}
		seen[i] = true
	}
	if !seen[p.Designated] {
		return "start: designated instance " + strconv.Quote(p.Designated) + " is not one of the instances"
	}
	return ""
}

// SharedServer is a source shard and a destination shard on one server (host and port,
// the host compared without case; the databases may differ).
type SharedServer struct {
	Source, Destination string // shard names
	Server              string // host:port
}

// SharedServers lists the source and destination shards of r that share a server, which
// Start refuses. The fence is the role's (ALTER ROLE ... NOLOGIN), and a role belongs to
// the whole server, so two shards on one server are fenced and opened together; but the
// cutover opens the destination once it publishes while the source stays fenced until
// finalize (the other way round on a reverse), and an instance the cutover missed would
// write to the source through the destination's opening.
func SharedServers(r *shardmap.Record) []SharedServer {
	if r == nil || r.Target == nil {
		return nil
	}
	var out []SharedServer
	for _, s := range r.Shards {
		for _, t := range r.Target.Shards {
			if strings.EqualFold(s.Backend.Host, t.Backend.Host) && s.Backend.Port == t.Backend.Port {
				out = append(out, SharedServer{Source: s.Name, Destination: t.Name, Server: s.Backend.Host + ":" + strconv.Itoa(int(s.Backend.Port))})
			}
		}
	}
	return out
}

func checkServers(r *shardmap.Record, role string) string {
	if sh := SharedServers(r); len(sh) > 0 {
		return "start: source shard " + sh[0].Source + " and destination shard " + sh[0].Destination + " are on the same server " +
			sh[0].Server + ", and the fence (ALTER ROLE " + role + " NOLOGIN) holds for a whole server, so they cannot be fenced apart: the cutover opens the destination once it publishes while the source stays fenced; put the destination shards on other servers"
	}
	return ""
}

func shardNames(l *shardmap.Layout) []string {
	out := make([]string, len(l.Shards))
	for i, s := range l.Shards {
		out[i] = s.Name
	}
	return out
}

func lowerName(s string) bool {
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// destName is the reshard destination database, rendered at generation g (§6.4 step 1).
func destName(r *shardmap.Record) string { return render.ReshardDatabase(r.Router.Name, r.Generation) }

// slotName is deterministic so a retried CopyData (after a restart) names the same slot.
func slotName(r *shardmap.Record) string {
	return "loam_" + r.Router.Name + "_" + u(r.Generation)
}

// shardSlot is the slot PgDog makes for source shard i of a COPY_DATA named slotName(r):
// the name with "_<i>" (pgdog/src/backend/replication/logical/publisher/slot.rs,
// ReplicationSlot::replication), and for destination shard i of the reverse stream the
// forward CUTOVER starts, which reuses the name (orchestrator.rs, refresh_publisher).
// Postgres refuses slot names over 63 bytes. Only Start's length check uses it: the drain
// names the stream by slotName (SlotDrain), not by any router's slot naming.
func shardSlot(r *shardmap.Record, i int) string { return slotName(r) + "_" + strconv.Itoa(i) }

// ---- step ids ----

func (m *Machine) prefix() string {
	p := m.s.Origin.Router.Name + "/" + u(m.s.Origin.Generation) + "/"
	if m.s.Reverse {
		p += "reverse" + strconv.Itoa(m.s.Round) + "/"
	}
	return p
}

func (m *Machine) stepID(target string) string {
	s := m.prefix() + m.s.Stage.String()
	if target != "" {
		s += "/" + target
	}
	return s
}

// ---- layouts and direction ----

func (m *Machine) layout(sd side) *shardmap.Layout {
	if sd == sideTarget {
		return m.s.Origin.Target
	}
	return &m.s.Origin.Layout
}

// from is the side traffic leaves in the current direction, to the side it moves to.
func (m *Machine) from() side {
	if m.s.Reverse {
		return sideTarget
	}
	return sideSource
}

func (m *Machine) to() side {
	if m.s.Reverse {
		return sideSource
	}
	return sideTarget
}

// cutTask is the task CUTOVER acts on in the current direction.
func (m *Machine) cutTask() taskRef {
	if m.s.Reverse {
		return m.s.ReverseTask
	}
	return m.s.Task
}

func (m *Machine) db() string         { return m.s.Origin.Router.Name }
func (m *Machine) designated() string { return m.s.Plan.Designated }

func (m *Machine) sequence() []stage {
	mu := m.s.Plan.Options.Mutants
	switch {
	case mu.PublishBeforeCutover:
		return stepsPublishBeforeCutover
	case mu.ResumeBeforePublish:
		return stepsResumeBeforePublish
	case mu.FilesBeforePublish:
		return stepsFilesBeforePublish
	case m.s.Reverse && m.s.Plan.Options.ReverseSettle > 0 && !mu.ReverseOpensAtOnce:
		return stepsReverseSettle
	}
	return stepsNormal
}

// after is the stage that follows st in steps 2–6, or what comes once they are done.
func (m *Machine) after(st stage) stage {
	seq := m.sequence()
	for i, s := range seq {
		if s == st && i+1 < len(seq) {
			return seq[i+1]
		}
	}
	return stCheck
}

// afterCheck is where the check after the resume leads: serving (forward) or stopping the
// stream the reverse CUTOVER started.
func (m *Machine) afterCheck() stage {
	if m.s.Reverse {
		return stStop
	}
	return stServing
}

// stream is the reverse stream of the current direction: the one the forward CUTOVER
// started (new shards to old), or, in a reverse, the one the reverse CUTOVER started.
func (m *Machine) stream() *taskRef {
	if m.s.Reverse {
		return &m.s.ReReverseTask
	}
	return &m.s.ReverseTask
}

// ---- events ----

func (m *Machine) emitDone(ctx *machine.Ctx) {
	ctx.Emit(Spec, "Done", machine.S("outcome", m.s.Outcome.String()), machine.U("gen", m.Generation()))
	m.out = append(m.out, Done{Outcome: m.s.Outcome, Generation: m.Generation(), Reason: m.s.Reason,
		Missed: append([]string(nil), m.s.Missed...), Lagging: append([]string(nil), m.s.Lagging...),
		Unresumed: append([]string(nil), m.s.Unresumed...)})
}

func (m *Machine) finish(ctx *machine.Ctx, o Outcome, reason string) {
	for _, t := range m.s.Timers {
		m.out = append(m.out, CancelTimer{machine.CancelTimer{ID: t.ID}})
	}
	m.s.Timers = nil
	m.s.Ops = nil
	m.s.Open = 0
	m.s.Stage = stDone
	m.s.Outcome = o
	m.s.Reason = reason
	if o == Halted {
		ctx.Emit(Spec, "Halt", machine.S("reason", reason))
		m.out = append(m.out, Alert{Step: m.prefix() + "halt", Reason: reason})
	}
	m.emitDone(ctx)
}

func (m *Machine) alert(step, reason string) {
	m.out = append(m.out, Alert{Step: step, Reason: reason})
}

// ---- timers ----

func (m *Machine) setTimer(id string, at int64) {
	for i := range m.s.Timers {
		if m.s.Timers[i].ID == id {
			m.s.Timers[i].At = at
			m.out = append(m.out, SetTimer{machine.SetTimer{ID: id, At: at}})
			return
		}
	}
	m.s.Timers = append(m.s.Timers, timer{ID: id, At: at})
	m.out = append(m.out, SetTimer{machine.SetTimer{ID: id, At: at}})
}

// dropTimer forgets a timer; cancel also tells the driver.
func (m *Machine) dropTimer(id string, cancel bool) bool {
	for i := range m.s.Timers {
		if m.s.Timers[i].ID == id {
			m.s.Timers = append(m.s.Timers[:i], m.s.Timers[i+1:]...)
			if cancel {
				m.out = append(m.out, CancelTimer{machine.CancelTimer{ID: id}})
			}
			return true
		}
	}
	return false
}

const retryPrefix = "retry:"

func (m *Machine) onTimer(ctx *machine.Ctx, id string) {
	if len(id) > len(retryPrefix) && id[:len(retryPrefix)] == retryPrefix {
		step := id[len(retryPrefix):]
		for i := range m.s.Ops {
			if o := &m.s.Ops[i]; o.Step == step && o.State == opWaiting {
				o.State = opSent
				m.issue(ctx, i)
				return
			}
		}
		return
	}
	if !m.dropTimer(id, false) {
		return // cancelled, or from an earlier stage
	}
	p := m.prefix()
	switch {
	case id == p+"catchup/deadline":
		if m.s.Stage == stCopy || m.s.Stage == stCatchUp {
			m.dropTimer(p+"catchup/next", true)
			ctx.Emit(Spec, "Timeout", machine.I("lag", m.s.LastLag))
			m.undo(ctx, "copy not caught up within "+i64(m.s.Plan.Options.CatchUpDeadline)+" ms (last lag "+i64(m.s.LastLag)+" bytes, threshold "+i64(m.s.Plan.Options.LagThreshold)+")")
		}
	case id == p+"catchup/next":
		if m.s.Stage == stCatchUp {
			m.poll(ctx)
		}
	case id == p+"resolve/next":
		if m.s.Stage == stResolve {
			m.enter(ctx, stResolve)
		}
	case id == p+"settle":
		if m.s.Stage == stSettle {
			m.enter(ctx, m.after(stSettle))
		}
	case id == p+"grace":
		if m.s.Stage == stGrace {
			ctx.Emit(Spec, "GraceOver")
			m.enter(ctx, stUnfence)
		}
	case id == p+"finalize-after":
		if m.s.Stage == stServing && m.s.Decision == decNone {
			m.s.Decision = decFinalize
			m.act(ctx)
		}
	}
}

// ---- ops ----

func (m *Machine) add(ctx *machine.Ctx, o op) {
	o.State = opSent
	m.s.Ops = append(m.s.Ops, o)
	m.s.Open++
	m.issue(ctx, len(m.s.Ops)-1)
}

func (m *Machine) addShards(ctx *machine.Ctx, k opKind, sd side) {
	for i, sh := range m.layout(sd).Shards {
		m.add(ctx, op{Step: m.stepID(sh.Name), Kind: k, Target: sh.Name, Side: sd, Index: i})
	}
}

func (m *Machine) addInstances(ctx *machine.Ctx, k opKind, skipDesignated bool) {
	for _, in := range m.s.Plan.Instances {
		if skipDesignated && in == m.designated() {
			continue
		}
		m.add(ctx, op{Step: m.stepID(in), Kind: k, Target: in})
	}
}

// issue appends the command of op i.
func (m *Machine) issue(ctx *machine.Ctx, i int) {
	o := &m.s.Ops[i]
	step := m.sent(o)
	var c Command
	switch o.Kind {
	case kRecord:
		c = WriteRecord{Step: step, Expect: m.s.Rec.Version, Record: m.s.Next}
	case kCopy:
		c = CopyData{Step: step, Instance: o.Target, Source: m.db(), Destination: destName(m.s.Origin),
			Publication: m.s.Plan.Publication, Slot: slotName(m.s.Origin)}
	case kAdopt, kList, kCheck:
		c = ListTasks{Step: step, Instance: o.Target}
	case kPoll:
		c = PollCopy{Step: step, Instance: o.Target, Task: o.Task, Slot: slotName(m.s.Origin), Shards: len(m.layout(sideSource).Shards)}
	case kPause:
		c = Pause{Step: step, Instance: o.Target, Database: m.db()}
	case kResume:
		c = Resume{Step: step, Instance: o.Target, Database: m.db()}
	case kFence:
		c = Fence{Step: step, Shard: o.Target, Backend: m.layout(o.Side).Shards[o.Index].Backend, Role: m.s.Plan.Role}
	case kUnfence:
		c = Unfence{Step: step, Shard: o.Target, Backend: m.layout(o.Side).Shards[o.Index].Backend, Role: m.s.Plan.Role}
	case kCutover:
		c = Cutover{Step: step, Instance: o.Target, Task: o.Task, Drain: m.drain()}
	case kFiles:
		r := m.filesRecord()
		c = WriteFiles{Step: step, Generation: r.Generation, Record: r}
	case kReload:
		r := m.filesRecord()
		c = Reload{Step: step, Instance: o.Target, Generation: r.Generation, Record: r}
	case kStop:
		c = StopTask{Step: step, Instance: o.Target, Task: o.Task}
	}
	m.out = append(m.out, c)
}

// sent is the step id of the attempt of o now in flight: the op's step for the first,
// with "#n" after it for the n-th ("app/4/fence/s1#2"). Only the answer of the attempt in
// flight settles an op. An answer to an earlier attempt (late, or repeated) says nothing
// about the one in flight, which may still run after it: taken for that one's answer, it
// could let the machine send the opposite command (the rollback's Unfence after a Fence,
// a Resume after a Pause) while this one is out, and this one could land last. A re-send
// after a restart is the same attempt and keeps its step id.
func (m *Machine) sent(o *op) string {
	if o.Attempt == 0 || m.s.Plan.Options.Mutants.RetryReusesStep {
		return o.Step
	}
	return o.Step + "#" + strconv.Itoa(o.Attempt+1)
}

// filesRecord is the record whose files WriteFiles and Reload carry: the stored one (the
// FilesBeforePublish mutant takes the one it is about to publish).
func (m *Machine) filesRecord() *shardmap.Record {
	if m.s.Plan.Options.Mutants.FilesBeforePublish && !m.s.Reverse && (m.s.Stage == stFiles || m.s.Stage == stReload) {
		return m.publishRecord(m.s.Rec)
	}
	return m.s.Rec
}

// find returns the index of the op whose attempt in flight has this step id, or -1.
func (m *Machine) find(step string) int {
	for i := range m.s.Ops {
		if o := &m.s.Ops[i]; o.State == opSent && m.sent(o) == step {
			return i
		}
	}
	return -1
}

var actionOf = [...]string{
	kCopy: "CopyData", kAdopt: "Adopt", kPoll: "Poll", kPause: "Pause", kFence: "Fence",
	kUnfence: "Unfence", kCutover: "Cutover", kList: "Resolve", kFiles: "WriteFiles",
	kReload: "Reload", kResume: "Resume", kStop: "StopTask", kCheck: "Check",
}

func (m *Machine) action(o *op) string {
	if o.Kind != kRecord {
		return actionOf[o.Kind]
	}
	switch m.s.Stage {
	case stBegin:
		return "Begin"
	case stPublish:
		return "Publish"
	case stFinish:
		return "Finish"
	}
	return "Abandon"
}

func (m *Machine) emitOp(ctx *machine.Ctx, o *op, ok bool, extra ...machine.Field) {
	var f [8]machine.Field
	fs := f[:0]
	switch o.Kind {
	case kFence, kUnfence:
		fs = append(fs, machine.S("shard", o.Target))
	case kRecord:
		fs = append(fs, machine.U("gen", m.s.Next.Generation))
	case kFiles:
		fs = append(fs, machine.U("gen", m.s.Rec.Generation))
	case kReload:
		fs = append(fs, machine.S("instance", o.Target), machine.U("gen", m.s.Rec.Generation))
	default:
		fs = append(fs, machine.S("instance", o.Target))
	}
	fs = append(fs, extra...)
	fs = append(fs, machine.B("ok", ok))
	if m.s.Reverse {
		fs = append(fs, machine.B("reverse", true))
	}
	if !ok {
		fs = append(fs, machine.S("err", o.Err))
	}
	ctx.Emit(Spec, m.action(o), fs...)
}

func (m *Machine) succeed(ctx *machine.Ctx, i int, extra ...machine.Field) {
	o := &m.s.Ops[i]
	o.State = opOK
	m.s.Open--
	m.emitOp(ctx, o, true, extra...)
	if m.s.Open == 0 {
		m.advance(ctx)
	}
}

// persistent reports whether a failed op of the current stage must be retried until it
// succeeds: past the point of no return the record, the files and the fence's release
// have no alternative, a rollback must put the designated instance back on the files'
// routing and release what it fenced before it resumes (the fence and the holds keep
// every write safe meanwhile), and a begin that failed may have landed (giving up would
// strand the record cutting_over). Finalize's STOP_TASK of the reverse stream is what
// keeps a rolled-back reverse's CUTOVER, still on its way, from being taken once the old
// shards open (PgDog refuses a CUTOVER of a stopped task, not of a
// running one): taken then, it swaps d onto them while the others write to the new ones.
// A reverse's own STOP_TASK gives up: its stream runs from the old shards to the new
// ones, which stay fenced, and no CUTOVER of it is ever sent.
func (m *Machine) persistent() bool {
	switch m.s.Stage {
	case stResolve:
		return !m.s.CutoverOK
	case stBegin, stPublish, stFiles, stOpen, stStop, stUnfence, stFinish, stUndoReload, stUndoUnfence, stUndoRecord:
		mu := m.s.Plan.Options.Mutants
		return !(m.s.Stage == stStop && (m.s.Reverse || mu.StopGivesUp)) && !(m.s.Stage == stUndoUnfence && mu.UndoUnfenceGivesUp)
	}
	return false
}

func (m *Machine) fail(ctx *machine.Ctx, i int, err string) {
	o := &m.s.Ops[i]
	o.Attempt++
	o.Err = err
	m.emitOp(ctx, o, false)
	if o.Kind == kCutover {
		// A CUTOVER that failed may still have swapped the instance's routing. Never send
		// it again blindly: ask the instance what happened.
		m.s.ReloadDesg = true
		m.resolve(ctx)
		return
	}
	opt := m.s.Plan.Options
	attempts := opt.Attempts
	if opt.InstanceAttempts > 0 && (o.Kind == kPause && m.s.Stage == stPause || o.Kind == kReload && m.s.Stage == stReload) && o.Target != m.designated() {
		attempts = opt.InstanceAttempts // the fence covers an instance that missed it (see InstanceAttempts)
	}
	if o.Attempt < attempts || m.persistent() {
		if o.Attempt >= attempts && !o.Alerted {
			o.Alerted = true
			m.alert(o.Step, strings.TrimSpace(m.action(o)+" "+o.Target)+" failed "+strconv.Itoa(o.Attempt)+" times ("+err+"); retrying until it succeeds, nothing else can proceed safely")
		}
		o.State = opWaiting
		delay := opt.RetryAfter
		if ctx.Rand != nil && opt.RetryAfter > 1 {
			delay += ctx.Rand.Int64N(opt.RetryAfter/2 + 1)
		}
		o.RetryAt = ctx.Now + delay
		m.out = append(m.out, SetTimer{machine.SetTimer{ID: retryPrefix + o.Step, At: o.RetryAt}})
		return
	}
	o.State = opFailed
	m.s.Open--
	if m.s.Open == 0 {
		m.advance(ctx)
	}
}

func (m *Machine) onReply(ctx *machine.Ctx, step string, err error) {
	i := m.find(step)
	if i < 0 {
		return
	}
	switch m.s.Ops[i].Kind {
	case kRecord, kCopy, kAdopt, kPoll, kList, kCheck:
		return // these are answered with their own inputs
	}
	if err != nil {
		m.fail(ctx, i, err.Error())
		return
	}
	if m.s.Ops[i].Kind == kCutover {
		m.s.CutoverOK = true
		if !m.s.Reverse {
			m.pastPNR()
		}
	}
	m.succeed(ctx, i)
}

// ---- stages ----

// enter starts stage st: it sends the stage's commands, or moves on at once when the
// stage has nothing to do in this direction.
func (m *Machine) enter(ctx *machine.Ctx, st stage) {
	m.s.Stage = st
	m.s.Ops = m.s.Ops[:0]
	m.s.Open = 0
	d := m.designated()
	switch st {
	case stBegin:
		m.writeRecord(ctx, beginRecord(m.s.Rec))
	case stCopy:
		m.s.CopyFrom = ctx.Now
		if !m.s.Plan.Options.Mutants.NoCatchUpDeadline {
			m.setTimer(m.prefix()+"catchup/deadline", ctx.Now+m.s.Plan.Options.CatchUpDeadline)
		}
		m.add(ctx, op{Step: m.stepID(d), Kind: kCopy, Target: d})
	case stCatchUp:
		m.s.Polls = 0
		m.poll(ctx)
		return
	case stPause:
		m.s.PauseSent = true
		m.s.Polls = 0 // resolve polls are numbered across CUTOVER tries (see resolve)
		m.addInstances(ctx, kPause, false)
	case stFence:
		// Both layouts: the one traffic leaves, so that an instance the pause missed fails
		// its writes there instead of losing them, and the one it moves to, so that nothing
		// (the designated instance once its CUTOVER swapped it, whose holds that clears)
		// writes there before the generation that routes to it is published. A write the
		// machine let through there would be stranded if it then read the CUTOVER as failed
		// and rolled back: the rollback serves the old layout, and no stream carries it back.
		mu := m.s.Plan.Options.Mutants
		if !mu.SkipFence {
			m.s.FenceSent = true
			m.addShards(ctx, kFence, m.from())
		}
		if !mu.UnfencedDestination {
			m.s.FenceSent = true
			m.addShards(ctx, kFence, m.to())
		}
	case stCutover:
		m.s.ReloadDesg = true
		m.s.CutoverTries++
		if m.s.Plan.Options.Mutants.ResolveRenumbers {
			m.s.Polls = 0
		}
		// Each try is an attempt of the same step, so its answer is told from an
		// earlier try's.
		m.add(ctx, op{Step: m.stepID(d), Kind: kCutover, Target: d, Task: m.cutTask().ID, Attempt: m.s.CutoverTries - 1})
	case stResolve:
		m.s.Polls++
		m.add(ctx, op{Step: m.stepID(d) + "/" + strconv.Itoa(m.s.Polls), Kind: kList, Target: d})
	case stRepause:
		// CUTOVER clears every maintenance hold on the instance it ran on: hold it again
		// until the new generation is published.
		m.add(ctx, op{Step: m.stepID(d), Kind: kPause, Target: d})
	case stPublish:
		m.writeRecord(ctx, m.publishRecord(m.s.Rec))
	case stFiles:
		m.add(ctx, op{Step: m.stepID(""), Kind: kFiles})
	case stSettle:
		// See Options.ReverseSettle: the RELOAD released d's clients the reverse CUTOVER had held,
		// routed by the new layout, onto the old one with the new one's shard index; they
		// wait for a login its fence refuses until checkout_timeout refuses them.
		m.setTimer(m.prefix()+"settle", ctx.Now+m.s.Plan.Options.ReverseSettle)
		return
	case stReload:
		// Forward, d is left on its CUTOVER's routing: a RELOAD would rebuild the pools
		// its reverse stream uses. A reverse reloads d too: PgDog's CUTOVER swaps the names
		// in the config d loaded from its files, never in the one the forward CUTOVER made
		// (pgdog/src/backend/databases.rs, cutover), so the reverse CUTOVER leaves d
		// routing to the new layout, fenced, and only the files of this generation take it
		// back to the old one.
		m.addInstances(ctx, kReload, !m.s.Reverse || m.s.Plan.Options.Mutants.ReverseKeepsDesignated)
	case stOpen:
		// The generation that routes to this layout is stored: its writes are the ones a
		// decision keeps from here on, whatever happens next.
		m.addShards(ctx, kUnfence, m.to())
	case stResume:
		m.addInstances(ctx, kResume, false)
	case stCheck:
		// The files of g+1 are in place: whatever d does from here, a restart reads them.
		// Did it restart since its CUTOVER (and read the files of g, routing to the fenced
		// old shards)? A restart loses its tasks, the reverse stream with them.
		if m.s.Plan.Options.Mutants.SkipCheck {
			m.enter(ctx, m.afterCheck())
			return
		}
		m.add(ctx, op{Step: m.stepID(d), Kind: kCheck, Target: d})
	case stCheckReload:
		m.add(ctx, op{Step: m.stepID(d), Kind: kReload, Target: d})
	case stServing:
		if m.s.Plan.Options.FinalizeAfter > 0 && m.s.Decision == decNone {
			m.setTimer(m.prefix()+"finalize-after", ctx.Now+m.s.Plan.Options.FinalizeAfter)
		}
		m.act(ctx)
		return
	case stStop:
		task := m.s.ReverseTask
		if m.s.Reverse {
			task = m.s.ReReverseTask
		}
		if task.Set {
			m.add(ctx, op{Step: m.stepID(d), Kind: kStop, Target: d, Task: task.ID})
		}
	case stFinalReload:
		// d was never reloaded after its CUTOVER (the reverse stream's pools); now that the
		// stream is stopped, put it on the files of the published generation before the
		// old shards open. If d restarted after its swap but before those files were
		// written, it read the previous generation's and routes to the old shards, which
		// the fence alone keeps its writes off: unfencing them now would let them land
		// where no layout serves them.
		if m.s.Plan.Options.Mutants.SkipFinalReload {
			m.s.FinalReloaded = true
			m.enter(ctx, stGrace)
			return
		}
		m.add(ctx, op{Step: m.stepID(d), Kind: kReload, Target: d})
	case stGrace:
		m.setTimer(m.prefix()+"grace", ctx.Now+m.s.Plan.Options.Grace)
		return
	case stUnfence:
		if len(m.s.Lagging) > 0 {
			// An instance that never reloaded may still route to the old shards: the
			// fence is all that keeps its writes off them.
			m.alert(m.stepID(""), "fence kept on the old shards: "+join(m.s.Lagging)+" never reloaded generation "+u(m.s.Rec.Generation)+"; unfence by hand once they route by it")
			ctx.Emit(Spec, "FenceKept", machine.I("lagging", int64(len(m.s.Lagging))))
			break
		}
		m.addShards(ctx, kUnfence, sideSource)
	case stFinish, stUndoRecord:
		m.writeRecord(ctx, serveRecord(m.s.Rec))
	case stUndoReload:
		if m.s.ReloadDesg && !m.s.Plan.Options.Mutants.SkipDesignatedReload {
			m.add(ctx, op{Step: m.stepID(d), Kind: kReload, Target: d})
		}
	case stUndoUnfence:
		// Only the layout traffic goes back to. The other one stays fenced: see undo.
		if m.s.FenceSent {
			m.addShards(ctx, kUnfence, m.from())
			if !m.s.Reverse && m.s.Plan.Options.Mutants.OpenDestinationOnRollback {
				m.addShards(ctx, kUnfence, m.to())
			} else if !m.s.Reverse && !m.s.Plan.Options.Mutants.UnfencedDestination {
				m.alert(m.stepID(""), "the destination shards "+join(shardNames(m.layout(sideTarget)))+" stay fenced (role "+m.s.Plan.Role+
					" cannot log in on their servers): nothing routes to them after the rollback, and the fence keeps a CUTOVER that lands late from taking writes there; the next cutover opens them once it publishes; to give up the reshard, let the role log in again there by hand (ALTER ROLE "+m.s.Plan.Role+" LOGIN)")
			}
		}
	case stUndoResume:
		if m.s.PauseSent {
			m.addInstances(ctx, kResume, false)
		}
	case stUndoStop:
		if m.s.Task.Set {
			m.add(ctx, op{Step: m.stepID(d), Kind: kStop, Target: d, Task: m.s.Task.ID})
		}
	}
	if m.s.Open == 0 && m.s.Stage == st {
		m.advance(ctx)
	}
}

// advance runs when every op of the stage has settled, succeeded or failed for good.
func (m *Machine) advance(ctx *machine.Ctx) {
	st := m.s.Stage
	failed := m.failed()
	switch st {
	case stBegin:
		m.enter(ctx, stCopy)
	case stCopy:
		switch {
		case failed != nil:
			if !m.s.Task.Set && !m.s.Plan.Options.Mutants.SilentLostCopy {
				// Every try may have reached the instance: an error can come after
				// COPY_DATA ran (the answer lost, a timeout) and a retry can then fail
				// (its slot taken by the task the first try started). The undo stops
				// only a task it knows, so say what may be left running.
				m.alert(failed.Step, "COPY_DATA on "+failed.Target+" failed "+strconv.Itoa(failed.Attempt)+" times without naming a task; a try whose answer was lost may have started one: look for it in SHOW TASKS on "+
					failed.Target+", stop it with STOP_TASK and drop replication slots "+slotName(m.s.Origin)+"_<shard> (one per source shard) if they are left")
			}
			m.undo(ctx, "COPY_DATA on "+failed.Target+" failed: "+failed.Err)
		case m.s.Abort:
			m.undo(ctx, "reverse requested before the point of no return")
		default:
			m.enter(ctx, stCatchUp)
		}
	case stPause:
		for _, o := range m.s.Ops {
			if o.State == opFailed && o.Target == m.designated() {
				m.undo(ctx, "designated instance "+o.Target+" did not pause: "+o.Err)
				return
			}
		}
		for _, o := range m.s.Ops {
			if o.State == opFailed && !slices.Contains(m.s.Missed, o.Target) && !(m.s.Reverse && m.s.Plan.Options.Mutants.MissedForwardOnly) {
				// It still routes to the layout traffic leaves, which the fence is about to
				// close: its writes fail (28000/57P01) instead of being lost.
				m.s.Missed = append(m.s.Missed, o.Target)
			}
		}
		if m.s.Abort && !m.s.PastPNR {
			m.undo(ctx, "reverse requested before the point of no return")
			return
		}
		m.enter(ctx, m.after(st))
	case stFence:
		if failed != nil {
			m.undo(ctx, "fence failed on shard "+failed.Target+": "+failed.Err)
			return
		}
		if m.s.Abort && !m.s.PastPNR {
			m.undo(ctx, "reverse requested before the point of no return")
			return
		}
		m.enter(ctx, m.after(st))
	case stCutover:
		m.resolve(ctx)
	case stResolve:
		if failed != nil {
			// Only when the CUTOVER answered OK (otherwise listing is retried until it
			// answers): the reverse stream's id is unknown.
			m.alert(failed.Step, "CUTOVER on "+m.designated()+" succeeded but its tasks could not be listed ("+failed.Err+"); the reverse stream's id is unknown, so Reverse will be refused and finalize will not stop it")
		}
		m.enter(ctx, m.after(st))
	case stReload:
		for _, o := range m.s.Ops {
			if o.State == opFailed {
				// Unpaused when it restarts, it reads the files just written; until then
				// it routes to fenced shards and its writes fail rather than get lost.
				m.s.Lagging = append(m.s.Lagging, o.Target)
			}
		}
		m.enter(ctx, m.after(st))
	case stResume:
		for _, o := range m.s.Ops {
			if o.State == opFailed || m.s.Plan.Options.Mutants.UnresumedOnRetry && o.Attempt > 0 {
				m.s.Unresumed = append(m.s.Unresumed, o.Target)
			}
		}
		m.enter(ctx, m.after(st))
	case stRepause, stPublish, stFiles, stOpen:
		m.enter(ctx, m.after(st))
	case stCheck:
		switch {
		case failed != nil && m.s.Reverse:
			m.alert(failed.Step, "listing the tasks of "+failed.Target+" failed after the reverse ("+failed.Err+"); if it restarted before the files of generation "+u(m.s.Rec.Generation)+" were written, its writes are refused until it is reloaded (ConfigPush does it for Done's generation)")
		case failed != nil:
			// Not known: finalize reloads d before the old shards open in any case.
			m.alert(failed.Step, "listing the tasks of "+failed.Target+" failed after the cutover ("+failed.Err+"); if it restarted before the files of generation "+u(m.s.Rec.Generation)+" were written, its writes are refused until finalize reloads it")
		case !m.stream().Set:
			// check found no stream: d restarted (or the stream ended).
			m.enter(ctx, stCheckReload)
			return
		default:
			m.s.Checked = !m.s.Reverse
		}
		m.enter(ctx, m.afterCheck())
	case stCheckReload:
		m.s.Checked = failed == nil && !m.s.Reverse
		if failed != nil && !slices.Contains(m.s.Lagging, failed.Target) {
			// Forward, finalize reloads it again (and takes it off the list if that works).
			m.alert(failed.Step, failed.Target+" restarted after its CUTOVER and may route by the files of the generation before "+u(m.s.Rec.Generation)+", to fenced shards, refusing writes; its RELOAD failed ("+failed.Err+"): reload it by hand")
			m.s.Lagging = append(m.s.Lagging, failed.Target)
		}
		m.enter(ctx, m.afterCheck())
	case stStop:
		if failed != nil {
			m.alert(failed.Step, "STOP_TASK failed: "+failed.Err)
		}
		if m.s.Reverse {
			m.finish(ctx, Reversed, "")
			return
		}
		m.enter(ctx, stFinalReload)
	case stFinalReload:
		m.s.FinalReloaded = true
		switch {
		case failed != nil && m.s.Checked:
			m.alert(failed.Step, "RELOAD of "+failed.Target+" at finalize failed ("+failed.Err+"); it was found on generation "+u(m.s.Rec.Generation)+"'s layout after the resume, so the old shards open anyway; reload it by hand to drop the reshard pools")
		case failed != nil && !slices.Contains(m.s.Lagging, failed.Target):
			// It may still route by the old generation's files: the fence stays.
			m.s.Lagging = append(m.s.Lagging, failed.Target)
		case failed == nil:
			// On the files of the published generation now, whatever the check found.
			m.s.Lagging = slices.DeleteFunc(m.s.Lagging, func(i string) bool { return i == m.designated() })
		}
		m.enter(ctx, stGrace)
	case stUnfence:
		m.enter(ctx, stFinish)
	case stFinish:
		m.finish(ctx, Finalized, "")
	case stUndoReload:
		m.enter(ctx, stUndoUnfence)
	case stUndoUnfence:
		m.enter(ctx, stUndoResume)
	case stUndoResume:
		for _, o := range m.s.Ops {
			if o.State == opFailed || m.s.Plan.Options.Mutants.UnresumedOnRetry && o.Attempt > 0 {
				m.s.Unresumed = append(m.s.Unresumed, o.Target)
			}
		}
		if m.s.Reverse {
			m.s.StaleReverseCut = m.s.StaleReverseCut || m.s.ReloadDesg
			m.s.Reverse = false
			m.s.Decision = decNone
			m.s.CutoverOK = true
			ctx.Emit(Spec, "ReverseAborted", machine.U("gen", m.s.Rec.Generation))
			m.enter(ctx, stServing)
			return
		}
		m.enter(ctx, stUndoStop)
	case stUndoStop:
		if failed != nil {
			m.alert(failed.Step, "STOP_TASK "+i64(m.s.Task.ID)+" on "+failed.Target+" failed ("+failed.Err+"); the copy task may still run: stop it by hand")
		}
		m.enter(ctx, stUndoRecord)
	case stUndoRecord:
		m.finish(ctx, RolledBack, m.s.Reason)
	}
}

func (m *Machine) failed() *op {
	for i := range m.s.Ops {
		if m.s.Ops[i].State == opFailed {
			return &m.s.Ops[i]
		}
	}
	return nil
}

// undo walks back what the current direction did, before its point of no return: put the
// designated instance back on the files' routing, release the fence of the layout traffic
// goes back to, resume, and (forward) stop the copy and give the record back to serving the
// source layout (at generation g+1: dropping the reshard target is a new generation).
//
// The layout traffic was moving to stays fenced. Nothing routes to it once the designated
// instance is back on the files, but a CUTOVER can still land there after the machine gave
// up on it (a call whose answer was lost and whose request arrives late swaps the instance
// again); the fence is what keeps that instance's writes off a layout no stream carries
// back from. Forward, the next cutover fences the destination again at step 3 and opens it
// once it publishes; an Alert names the shards for an operator who gives the reshard up.
// Reverse, the source it leaves fenced is the fenced retired layout it was before.
func (m *Machine) undo(ctx *machine.Ctx, reason string) {
	m.dropTimer(m.prefix()+"catchup/deadline", true)
	m.dropTimer(m.prefix()+"catchup/next", true)
	m.dropTimer(m.prefix()+"resolve/next", true)
	if m.s.Reverse {
		ctx.Emit(Spec, "Rollback", machine.S("reason", reason), machine.B("reverse", true))
	} else {
		ctx.Emit(Spec, "Rollback", machine.S("reason", reason))
		m.s.Reason = reason
	}
	m.enter(ctx, stUndoReload)
}

// stuckPolls is how many listings of a CUTOVER still in progress raise an Alert (again
// every as many).
const stuckPolls = 20

// resolve asks the designated instance what its CUTOVER did. Its polls are numbered on
// from the last try's, never from 1 again: a late answer to a list taken before this try
// went out would say the task still waits for its CUTOVER, and, taken for this try's
// list, would send CUTOVER again or roll back a cutover that took.
func (m *Machine) resolve(ctx *machine.Ctx) {
	m.enter(ctx, stResolve)
}

// ---- catch-up ----

func (m *Machine) poll(ctx *machine.Ctx) {
	m.s.Polls++
	d := m.designated()
	m.s.Ops = m.s.Ops[:0]
	m.s.Open = 0
	m.add(ctx, op{Step: m.prefix() + "catchup/" + strconv.Itoa(m.s.Polls), Kind: kPoll, Target: d, Task: m.s.Task.ID})
}

func (m *Machine) onCopyStarted(ctx *machine.Ctx, in CopyStarted) {
	i := m.find(in.Step)
	if i < 0 || m.s.Ops[i].Kind != kCopy {
		if in.Err == nil && !m.s.Task.Set && m.copyStep(in.Step) {
			// A late answer after the copy was given up: remember the task so the undo
			// stops it, or say that it is left running.
			m.s.Task = some(in.Task)
			if !(m.s.Stage >= stUndoReload && m.s.Stage < stUndoStop) {
				m.alert(in.Step, "COPY_DATA task "+i64(in.Task)+" on "+m.designated()+" started after the cutover gave up on it: stop it with STOP_TASK")
			}
		}
		return
	}
	if in.Err != nil {
		m.fail(ctx, i, in.Err.Error())
		return
	}
	m.s.Task = some(in.Task)
	m.succeed(ctx, i, machine.I("task", in.Task))
}

func (m *Machine) onPolled(ctx *machine.Ctx, in CopyPolled) {
	i := m.find(in.Step)
	if i < 0 || m.s.Ops[i].Kind != kPoll {
		return
	}
	o := &m.s.Ops[i]
	o.State = opOK
	m.s.Open = 0
	next := m.prefix() + "catchup/next"
	if in.Err != nil {
		o.Err = in.Err.Error()
		m.emitOp(ctx, o, false)
		m.setTimer(next, ctx.Now+m.s.Plan.Options.PollEvery)
		return
	}
	st := in.Task.State
	m.s.LastLag = in.LagBytes
	ctx.Emit(Spec, "Poll", machine.S("instance", o.Target), machine.S("task", st.String()), machine.I("lag", in.LagBytes), machine.B("ok", true))
	switch {
	case !st.active() || st == TaskCuttingOver:
		if st == TaskFinished || st == TaskCuttingOver {
			m.s.ReloadDesg = true // only CUTOVER finishes a COPY_DATA task: routing may have moved
		}
		m.undo(ctx, strings.TrimSuffix("copy task "+i64(m.s.Task.ID)+" is "+st.String()+" before the cutover: "+in.Task.Detail, ": "))
	case m.s.Abort:
		m.undo(ctx, "reverse requested before the point of no return")
	// An unknown lag (-1: the driver's SlotLag found the slot not listed, or its lag NULL)
	// is not caught up. Safety does not rest on it: the Cutover's Drain waits, fenced, for
	// every shard's slot to confirm the fenced point and keeps CUTOVER from being sent when
	// it cannot (a slot not listed fails it, adapters/postgres ErrNoSlot), which is what
	// keeps acknowledged writes (world SkipDrain/lost). Kept as part of the threshold: a
	// pause on an unknown backlog holds writes while the drain waits, and a drain past its
	// timeout rolls the cutover back (cutover-as-decided, the threshold's harm).
	case (st == TaskReplicating || m.s.Plan.Options.Mutants.CatchUpWhileSyncing) && in.LagBytes >= 0 && in.LagBytes <= m.s.Plan.Options.LagThreshold:
		m.dropTimer(m.prefix()+"catchup/deadline", true)
		ctx.Emit(Spec, "CaughtUp", machine.I("lag", in.LagBytes))
		m.enter(ctx, stPause)
	default:
		m.setTimer(next, ctx.Now+m.s.Plan.Options.PollEvery)
	}
}

// copyStep reports whether step names an attempt of the forward COPY_DATA on the
// designated instance ("<db>/<g>/copy/<d>[#n]").
func (m *Machine) copyStep(step string) bool {
	base := m.s.Origin.Router.Name + "/" + u(m.s.Origin.Generation) + "/copy/" + m.designated()
	n, ok := strings.CutPrefix(step, base)
	if !ok || n == "" {
		return ok
	}
	_, err := strconv.ParseUint(strings.TrimPrefix(n, "#"), 10, 32)
	return n[0] == '#' && err == nil
}

// ---- task lists: adopting a copy after a restart, resolving a CUTOVER, the check ----

// check reads d's tasks after the resume. The stream its CUTOVER started still running
// means d has not restarted since, so it routes by the swap it made. Gone (a restart loses
// every task), d may route by the files of the generation before, to fenced shards: it is
// reloaded onto the files just published now (stCheckReload) rather than at finalize, which
// may be days away, or (in a reverse) never. A stream the machine never learnt (its listing
// failed at the CUTOVER) is learnt here if d lists one.
func (m *Machine) check(ctx *machine.Ctx, i int, tasks []Task) {
	known := m.stream()
	stream := *known
	alive := false
	for _, t := range tasks {
		switch {
		case known.Set && t.ID == known.ID:
			alive = t.State.active()
		case !known.Set && t.ID > m.cutTask().ID && t.State.active() && m.mayBeStream(t) && (!alive || t.ID > stream.ID):
			stream, alive = some(t.ID), true
		}
	}
	if !alive {
		*known = taskRef{} // nothing to stop; forward, a later Reverse is refused
		what, why := "reverse stream", "; Reverse is no longer possible"
		if m.s.Reverse {
			what, why = "stream of its reverse CUTOVER", ""
		}
		m.alert(m.s.Ops[i].Step, m.designated()+" lists no "+what+" (it restarted, or the stream ended): reloading it onto generation "+u(m.s.Rec.Generation)+why)
		m.succeed(ctx, i, machine.B("restarted", true), machine.I("stream", 0))
		return
	}
	*known = stream
	m.succeed(ctx, i, machine.B("restarted", false), machine.I("stream", stream.ID))
}

func (m *Machine) onTasks(ctx *machine.Ctx, in TasksListed) {
	i := m.find(in.Step)
	if i < 0 || (m.s.Ops[i].Kind != kList && m.s.Ops[i].Kind != kAdopt && m.s.Ops[i].Kind != kCheck) {
		return
	}
	if in.Err != nil {
		m.fail(ctx, i, in.Err.Error())
		return
	}
	switch m.s.Ops[i].Kind {
	case kAdopt:
		m.adopt(ctx, i, in.Tasks)
		return
	case kCheck:
		m.check(ctx, i, in.Tasks)
		return
	}
	cut := m.cutTask()
	var own Task
	var stream taskRef
	for _, t := range in.Tasks {
		switch {
		case cut.Set && t.ID == cut.ID:
			own = t
		case t.ID > cut.ID && t.State.active() && m.mayBeStream(t) && (!stream.Set || t.ID > stream.ID):
			stream = some(t.ID) // the stream CUTOVER started (new shards to old)
		}
	}
	// Only the CUTOVER's own answer or its task finished says it took: PgDog lists every
	// database's tasks on the instance, so a newer active task beside a failed or missing
	// one may be another database's, not a stream this CUTOVER started (the rollback after
	// a CUTOVER that did swap is safe: both layouts are fenced and d is reloaded).
	applied := m.s.CutoverOK || own.State == TaskFinished || m.s.Plan.Options.Mutants.AnyNewerStreamTakes && stream.Set
	switch {
	case applied && m.s.Reverse && m.s.StaleReverseCut && !m.s.CutoverOK && !m.s.Plan.Options.Mutants.StaleReverseTrusted:
		// The stream was finished, but maybe by the CUTOVER of a rolled-back round that
		// landed late, while the new layout served: what was written there since is on
		// no stream to the old shards. Not reversing is safe; guessing is not.
		o := &m.s.Ops[i]
		o.State = opOK
		m.s.Open = 0
		m.emitOp(ctx, o, true, machine.B("applied", false), machine.I("stream", 0))
		m.s.ReverseTask = taskRef{} // a later Reverse is refused
		m.undo(ctx, "reverse stream "+i64(cut.ID)+" on "+m.designated()+" is "+own.State.String()+" after a CUTOVER that failed, and an earlier reverse's CUTOVER may have landed late: the old shards may miss writes, so the reverse is abandoned")
	case applied:
		if m.s.Reverse {
			m.s.ReReverseTask = stream
		} else {
			m.s.ReverseTask = stream
			m.pastPNR()
		}
		m.s.CutoverOK = true
		if !stream.Set {
			m.alert(m.s.Ops[i].Step, "CUTOVER on "+m.designated()+" took effect but no reverse stream is listed; Reverse will be refused")
		}
		m.succeed(ctx, i, machine.B("applied", true), machine.I("stream", stream.ID))
	case own.State == TaskReplicating:
		// Still waiting for its CUTOVER: it did not take.
		o := &m.s.Ops[i]
		o.State = opOK
		m.s.Open = 0
		m.emitOp(ctx, o, true, machine.B("applied", false), machine.I("stream", 0))
		if m.s.CutoverTries < m.s.Plan.Options.Attempts && !(m.s.Abort && !m.s.Reverse) {
			m.enter(ctx, stCutover)
			return
		}
		m.undo(ctx, "CUTOVER "+i64(cut.ID)+" on "+m.designated()+" did not take after "+strconv.Itoa(m.s.CutoverTries)+" attempts")
	case own.State == TaskCuttingOver || own.State == TaskUnknown || own.State == TaskStopping:
		o := &m.s.Ops[i]
		o.State = opOK
		m.s.Open = 0
		m.emitOp(ctx, o, true, machine.B("applied", false), machine.I("stream", 0))
		if m.s.Polls%stuckPolls == 0 {
			// Nothing can be decided while it runs, and every instance is held meanwhile.
			m.alert(m.s.Ops[i].Step, "CUTOVER "+i64(cut.ID)+" on "+m.designated()+" is still "+own.State.String()+" after "+strconv.Itoa(m.s.Polls)+" listings: every instance is paused and both layouts are fenced until it ends; see SHOW TASKS on "+m.designated())
		}
		m.setTimer(m.prefix()+"resolve/next", ctx.Now+m.s.Plan.Options.PollEvery)
	default:
		o := &m.s.Ops[i]
		o.State = opOK
		m.s.Open = 0
		m.emitOp(ctx, o, true, machine.B("applied", false), machine.I("stream", 0))
		if m.s.Reverse {
			m.s.ReverseTask = taskRef{} // the reverse stream is gone: a later Reverse is refused
		}
		m.undo(ctx, strings.TrimSpace("CUTOVER "+i64(cut.ID)+" on "+m.designated()+" failed: task is "+own.State.String()+" "+own.Detail))
	}
}

// mayBeStream reports whether task t, newer than the one a CUTOVER cut, may be the stream
// that CUTOVER started: PgDog lists every database's tasks together, so a newer active task
// can be another database's copy or stream, and taken for this cutover's it would be
// stopped at finalize, or cut over by a Reverse. A task whose Kind names this copy's
// databases (StreamOf) may be; so may one whose lister says nothing (Kind ""), as before
// SHOW TASKS's type was read.
func (m *Machine) mayBeStream(t Task) bool {
	if mu := m.s.Plan.Options.Mutants; t.Kind == "" || mu.StreamOfAnyDatabase || mu.AnyNewerStreamTakes {
		return true
	}
	// Either way round: PgDog names the stream back by the copy it reverses (recorded), and
	// a name from the stream's own source is this copy's too.
	src, dst, ok := StreamOf(t.Kind)
	db, d := m.db(), destName(m.s.Origin)
	return ok && (src == db && dst == d || src == d && dst == db)
}

// adopt picks up the copy a COPY_DATA sent before a restart started, or sends it again.
//
// PgDog lists every database's tasks together and runs several copies at once, so the
// newest active task can be another database's: cut over, it would carry this cutover past
// its point of no return with its own database still on the source. Only a task whose Kind
// names this copy (CopyOf: this database into destName, which carries the generation, as
// the slot does) is adopted. When adopt cannot tell, it guesses neither way: two active
// tasks naming this copy, one that is not syncing or replicating, or an active task that
// names the destination otherwise or says nothing (Kind "") may be the copy, and sending
// COPY_DATA again would start a second copy into the same destination. The listing then
// fails, is retried like any (the task may end meanwhile), and after Attempts the copy
// stage rolls back with the Alert of a COPY_DATA that may have started a task it never
// named: nothing is paused or fenced yet, the source keeps serving, and nothing is
// stopped, since the task to stop is the unknown.
func (m *Machine) adopt(ctx *machine.Ctx, i int, tasks []Task) {
	if m.s.Plan.Options.Mutants.AdoptAnyTask {
		var best taskRef
		for _, t := range tasks {
			if (t.State == TaskSyncing || t.State == TaskReplicating) && (!best.Set || t.ID > best.ID) {
				best = some(t.ID)
			}
		}
		if best.Set {
			m.s.Task = best
			m.succeed(ctx, i, machine.I("task", best.ID))
			return
		}
		tasks = nil
	}
	dst := destName(m.s.Origin)
	var mine, unclear []string
	var own Task
	for _, t := range tasks {
		if !t.State.active() {
			continue
		}
		switch src, d, ok := CopyOf(t.Kind); {
		case ok && src == m.db() && d == dst:
			own = t
			mine = append(mine, i64(t.ID)+" ("+t.State.String()+")")
		case t.Kind == "" || slices.Contains(strings.Fields(t.Kind), dst):
			unclear = append(unclear, i64(t.ID)+" ("+strconv.Quote(t.Kind)+", "+t.State.String()+")")
		}
	}
	switch {
	case len(mine) == 1 && (own.State == TaskSyncing || own.State == TaskReplicating):
		m.s.Task = some(own.ID)
		m.succeed(ctx, i, machine.I("task", own.ID))
	case len(mine) == 0 && len(unclear) == 0:
		o := &m.s.Ops[i]
		o.Kind, o.Step, o.Attempt = kCopy, m.stepID(o.Target), 0
		m.issue(ctx, i)
	default:
		why := "tasks copying " + m.db() + " into " + dst + ": " + strings.Join(mine, ", ")
		if len(mine) == 0 {
			why = "no task names the copy of " + m.db() + " into " + dst + ", but these may be it: " + strings.Join(unclear, ", ")
		}
		m.fail(ctx, i, "SHOW TASKS on "+m.designated()+" lists no task that is provably this cutover's copy ("+why+"); neither adopting one nor sending COPY_DATA again")
	}
}

// ---- decisions ----

func (m *Machine) decide(ctx *machine.Ctx, d decision) {
	if m.s.Stage == stIdle {
		return
	}
	if !m.s.PastPNR {
		if d == decReverse && !m.s.Abort {
			m.s.Abort = true
			ctx.Emit(Spec, "Reverse", machine.B("past_pnr", false))
			if m.s.Stage == stCatchUp {
				m.undo(ctx, "reverse requested before the point of no return")
			}
		}
		return
	}
	if m.s.Decision != decNone || m.s.Reverse {
		return
	}
	m.s.Decision = d
	if m.s.Stage == stServing {
		m.act(ctx)
	}
}

// act carries out the decision once every instance has resumed.
func (m *Machine) act(ctx *machine.Ctx) {
	switch m.s.Decision {
	case decFinalize:
		m.dropTimer(m.prefix()+"finalize-after", true)
		ctx.Emit(Spec, "Finalize", machine.U("gen", m.s.Rec.Generation))
		m.enter(ctx, stStop)
	case decReverse:
		if !m.s.ReverseTask.Set && !m.s.Plan.Options.Mutants.ReverseWithoutStream {
			m.s.Decision = decNone
			m.alert(m.prefix()+"reverse", "Reverse refused: no reverse stream is known on "+m.designated()+" (it restarted, or CUTOVER started none); the old shards are not current")
			ctx.Emit(Spec, "ReverseRefused")
			id := m.prefix() + "finalize-after"
			if fa := m.s.Plan.Options.FinalizeAfter; fa > 0 && !slices.ContainsFunc(m.s.Timers, func(t timer) bool { return t.ID == id }) {
				// Serving was entered with this decision pending, so its timer was not set.
				m.setTimer(id, ctx.Now+fa)
			}
			return
		}
		m.dropTimer(m.prefix()+"finalize-after", true)
		m.s.Reverse = true
		m.s.Round++
		m.s.PauseSent, m.s.FenceSent, m.s.ReloadDesg = false, false, false
		m.s.CutoverTries, m.s.CutoverOK = 0, false
		// A CUTOVER of this reverse that lands after the machine gave up on it swaps d
		// behind the machine's back: what the forward check found no longer holds.
		m.s.Checked = false
		ctx.Emit(Spec, "Reverse", machine.B("past_pnr", true), machine.I("round", int64(m.s.Round)))
		m.enter(ctx, stPause)
	}
}

// ---- restart ----

func (m *Machine) restart(ctx *machine.Ctx) {
	if m.s.Stage == stIdle {
		return
	}
	ctx.Emit(Spec, "Restart", machine.S("stage", m.s.Stage.String()), machine.B("reverse", m.s.Reverse))
	// Saved by a version without finalize's reload of d: run it now, before the source
	// opens (the grace starts again after it).
	legacy := m.s.Stage == stGrace && !m.s.Reverse && !m.s.FinalReloaded
	if legacy {
		m.dropTimer(m.prefix()+"grace", false)
	}
	if m.s.Stage == stGrace && !legacy && !m.s.Plan.Options.Mutants.GraceFromSnapshot {
		// The grace is what keeps a request still travelling to the old shards from
		// landing once they open. Its deadline is on the wall clock, which may have
		// stepped forward while no process was running: wait it out again from now.
		for i := range m.s.Timers {
			if t := &m.s.Timers[i]; t.ID == m.prefix()+"grace" {
				t.At = max(t.At, ctx.Now+m.s.Plan.Options.Grace)
			}
		}
	}
	for _, t := range m.s.Timers {
		m.out = append(m.out, SetTimer{machine.SetTimer{ID: t.ID, At: t.At}})
	}
	if legacy {
		m.enter(ctx, stFinalReload)
		return
	}
	for i := range m.s.Ops {
		o := &m.s.Ops[i]
		switch o.State {
		case opWaiting:
			m.out = append(m.out, SetTimer{machine.SetTimer{ID: retryPrefix + o.Step, At: o.RetryAt}})
		case opSent:
			switch o.Kind {
			case kCutover:
				m.resolve(ctx)
				return
			case kCopy:
				o.Kind, o.Step = kAdopt, m.prefix()+"copy/adopt"
			}
			m.issue(ctx, i)
		}
	}
}

// pastPNR marks the forward CUTOVER as taken. A Reverse that arrived while it was in flight
// (Abort) cannot roll back any more: it becomes the decision, carried out once every
// instance has resumed, rather than being dropped (and finalize-after finalizing instead).
func (m *Machine) pastPNR() {
	m.s.PastPNR = true
	if m.s.Abort && m.s.Decision == decNone {
		m.s.Decision = decReverse
	}
}

// drain is what a Cutover waits for before its CUTOVER: the stream of the task it cuts
// over, on every shard traffic leaves (fenced by now: stFence precedes stCutover). The
// forward copy and PgDog's reverse stream both carry the slot name the copy was given
// (see SlotDrain), so both directions drain the same name.
func (m *Machine) drain() []SlotDrain {
	if mu := m.s.Plan.Options.Mutants; mu.SkipDrain || m.s.Reverse && mu.SkipReverseDrain {
		return nil
	}
	var out []SlotDrain
	for _, sh := range m.layout(m.from()).Shards {
		out = append(out, SlotDrain{Shard: sh.Name, Backend: sh.Backend, Slot: slotName(m.s.Origin)})
	}
	return out
}
