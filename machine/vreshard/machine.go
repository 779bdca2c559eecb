package vreshard

import (
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Spec is the spec the machine's events belong to.
const Spec = "VitessReshard"

// The actions the machine emits.
const (
	ActStart    = "Start"    // a Start was accepted; keyspace, workflow, source, target, max_lag_ms
	ActRefuse   = "Refuse"   // the start or the pre-flight refused; reason
	ActInspect  = "Inspect"  // the pre-flight facts arrived; problems
	ActMirror   = "Mirror"   // the record mirrors the serving partition; gen, version, layout
	ActCreate   = "Create"   // ReshardCreate answered
	ActCopy     = "Copy"     // a Status answered; copying, lag
	ActVDiff    = "VDiff"    // a VDiff answered; done, mismatch
	ActSwitch   = "Switch"   // a SwitchTraffic answered; types, reverse
	ActVerify   = "Verify"   // the vtgate check answered
	ActComplete = "Complete" // Reshard complete answered
	ActCancel   = "Cancel"   // Reshard cancel answered, or a cancel was asked (asked=true)
	ActReverse  = "Reverse"  // the machine turned to reversing the traffic; reason
	ActRetry    = "Retry"    // a command failed and is sent again later; err
	ActRestart  = "Restart"  // the machine was restored and re-issued what was in flight
	ActDone     = "Done"     // the reshard ended; outcome, gen
	ActHold     = "Hold"     // the writes are switched and verified: waiting for finalize or a rollback; finalize_after
	ActFinalize = "Finalize" // the hold ended: an operator's finalize, or finalize_after elapsed; by
)

type stage uint8

const (
	stIdle stage = iota
	stInspect
	stRead  // mirror: ReadServing
	stWrite // mirror: WriteRecord
	stCreate
	stCopy
	stVDiff
	stReads
	stWrites
	stVerify
	stComplete
	stUnswitchReads
	stCancel
	stReverse
	stDone
	// stHold is after stDone so that the stage numbers a snapshot holds keep their meaning.
	stHold
	stageCount
)

var stageNames = [...]string{"idle", "inspect", "read", "write", "create", "copy", "vdiff", "reads", "writes", "verify", "complete", "unswitch-reads", "cancel", "reverse", "done", "hold"}

// state is everything the machine knows; Snapshot carries it whole.
type state struct {
	Start   Start
	Rec     *shardmap.Record // last record known stored
	Next    *shardmap.Record // what the WriteRecord in flight stores
	Stage   stage
	After   stage // the stage a mirror leads to
	Final   Outcome
	Serving []string // the PRIMARY partition last read, shard names in order
	Sent    bool
	Polling bool // the stage waits on PollEvery, not on a retry
	Attempt int
	RetryAt int64
	Alerted bool
	Rebases int
	UUID    string // the VDiff's

	ReadsSwitched, WritesSwitched, Verified bool
	CancelAsked                             bool
	Outcome                                 Outcome
	Reason                                  string
}

// Machine drives one Reshard. It holds state only.
type Machine struct {
	s   state
	out []Command
}

// New returns an idle machine; feed it Start.
func New() *Machine { return &Machine{} }

// Done reports whether the reshard has ended, and how.
func (m *Machine) Done() (Outcome, bool) { return m.s.Outcome, m.s.Stage == stDone }

// On consumes one input and returns the commands to execute. Answers that are not for the
// command in flight change nothing.
func (m *Machine) On(ctx *machine.Ctx, in Input) []Command {
	m.out = nil
	if m.s.Stage == stDone {
		if _, ok := in.(Restarted); ok {
			m.emitDone(ctx)
		}
		return m.take()
	}
	switch in := in.(type) {
	case Start:
		m.start(ctx, in)
	case Restarted:
		m.restart(ctx)
	case CancelRequest:
		m.cancelAsked(ctx)
	case Finalize:
		if m.s.Stage == stHold {
			m.finalize(ctx, "operator")
		}
	case TimerFired:
		if m.s.Stage == stHold && m.s.RetryAt != 0 && in.ID == m.timerID() {
			m.s.RetryAt = 0
			m.finalize(ctx, "finalize_after")
			return m.take()
		}
		if m.s.Stage != stIdle && !m.s.Sent && m.s.RetryAt != 0 && in.ID == m.timerID() {
			m.s.RetryAt = 0
			m.send(ctx)
		}
	default:
		m.answer(ctx, in)
	}
	return m.take()
}

func (m *Machine) take() []Command {
	out := m.out
	m.out = nil
	return out
}

func (m *Machine) ks() string { return m.s.Start.Record.Router.Name }

func (m *Machine) start(ctx *machine.Ctx, in Start) {
	if m.s.Stage != stIdle {
		return
	}
	in.Options = in.Options.withDefaults()
	in.Record = in.Record.Clone()
	in.Source, in.Target = slices.Clone(in.Source), slices.Clone(in.Target)
	m.s.Start = in
	m.s.Rec = in.Record.Clone()
	if reason := checkStart(in); reason != "" {
		ctx.Emit(Spec, ActRefuse, machine.S("reason", reason))
		m.finish(ctx, Refused, reason)
		return
	}
	ctx.Emit(Spec, ActStart, machine.S("keyspace", m.ks()), machine.S("workflow", in.Workflow),
		machine.S("source", list(in.Source)), machine.S("target", list(in.Target)), machine.I("max_lag_ms", in.Options.MaxLagMs))
	m.enter(ctx, stInspect)
}

func checkStart(in Start) string {
	r := in.Record
	switch {
	case r == nil:
		return "start: no record"
	case r.Router.Kind != shardmap.Vitess:
		return "start: the record's database is not routed by Vitess; use the fenced cutover"
	case in.Workflow == "" || strings.ContainsAny(in.Workflow, "/ "):
		return "start: name the workflow (no '/' or spaces)"
	case in.Cell == "":
		return "start: name the cell whose serving graph the record mirrors (e.g. zone1)"
	}
	if _, ok := r.Layout.Scheme.(shardmap.Vindex); !ok {
		return "start: the record's scheme is not a vindex scheme"
	}
	if err := r.Validate(); err != nil {
		return "start: record is invalid: " + err.Error()
	}
	if r.State.Phase != shardmap.Serving {
		return "start: the record is " + r.State.Phase.String() + ", not serving; finish or cancel what runs first"
	}
	if !slices.Equal(names(r.Layout), in.Source) {
		return "start: the record's shards are " + list(names(r.Layout)) + " but the source is " + list(in.Source) + "; reshard what serves"
	}
	for _, t := range in.Target {
		if b, ok := in.Backends[t]; !ok || b.Host == "" || b.Port == 0 {
			return "start: no primary host:port given for target shard " + t
		}
	}
	return ""
}

func (m *Machine) stepID() string {
	s := m.ks() + "/" + m.s.Start.Workflow + "/"
	switch m.s.Stage {
	case stRead:
		return s + "mirror>" + stageNames[m.s.After] + m.finalTag()
	case stWrite:
		return s + "mirror>" + stageNames[m.s.After] + m.finalTag() + "@" + strconv.FormatUint(m.s.Rec.Version, 10)
	}
	return s + stageNames[m.s.Stage]
}

func (m *Machine) finalTag() string {
	if m.s.Final != 0 {
		return ":" + m.s.Final.String()
	}
	return ""
}

func (m *Machine) timerID() string {
	if m.s.Stage == stHold {
		return "finalize:" + m.stepID()
	}
	if m.s.Polling {
		return "poll:" + m.stepID()
	}
	return "retry:" + m.stepID()
}

// mirror reads the serving partition and writes it into the record, then enters after
// (final: the reshard ends with that outcome once the record holds it).
func (m *Machine) mirror(ctx *machine.Ctx, after stage, final Outcome) {
	m.s.After, m.s.Final = after, final
	if after == stVerify && m.s.Start.Options.Mutants.SkipMirror {
		m.enter(ctx, after)
		return
	}
	m.enter(ctx, stRead)
}

func (m *Machine) enter(ctx *machine.Ctx, st stage) {
	m.s.Stage = st
	m.s.Attempt, m.s.Alerted, m.s.RetryAt, m.s.Polling, m.s.Rebases = 0, false, 0, false, 0
	switch st {
	case stVDiff:
		if m.s.Start.Options.Mutants.SkipVDiff {
			m.enter(ctx, stReads)
			return
		}
		if m.s.UUID == "" {
			m.s.UUID = newUUID(ctx)
		}
	case stDone:
		m.finish(ctx, m.s.Final, m.s.Reason)
		return
	case stHold:
		// Nothing is sent: ReverseTraffic stays possible (the reverse workflow replicates
		// the target's writes back to the source) until finalize, or finalize_after.
		fa := m.s.Start.Options.FinalizeAfter
		ctx.Emit(Spec, ActHold, machine.I("finalize_after_ms", fa))
		if fa > 0 {
			m.s.RetryAt = ctx.Now + fa
			m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.timerID(), At: m.s.RetryAt}})
		}
		return
	}
	m.send(ctx)
}

// finalize ends the hold: Complete, after which the source shards cannot take the
// traffic back.
func (m *Machine) finalize(ctx *machine.Ctx, by string) {
	if m.s.RetryAt != 0 {
		m.out = append(m.out, cancelTimer(m.timerID()))
	}
	ctx.Emit(Spec, ActFinalize, machine.S("by", by))
	m.enter(ctx, stComplete)
}

// newUUID is a version-4 UUID from ctx.Rand (Vitess takes the VDiff's id from the caller).
func newUUID(ctx *machine.Ctx) string {
	const hexd = "0123456789abcdef"
	var b [16]byte
	for i := range b {
		if ctx.Rand != nil {
			b[i] = byte(ctx.Rand.IntN(256))
		}
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	var s strings.Builder
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s.WriteByte('-')
		}
		s.WriteByte(hexd[c>>4])
		s.WriteByte(hexd[c&15])
	}
	return s.String()
}

var (
	readTypes = []string{"replica", "rdonly"}
	allTypes  = []string{"primary", "replica", "rdonly"}
)

func (m *Machine) send(ctx *machine.Ctx) {
	m.s.Sent = true
	st, step, at := m.s.Start, m.stepID(), m.s.Attempt+1
	ks, wf := m.ks(), st.Workflow
	var c Command
	switch m.s.Stage {
	case stInspect:
		c = Inspect{Step: step, Attempt: at, Keyspace: ks, Cell: st.Cell, Source: slices.Clone(st.Source), Target: slices.Clone(st.Target)}
	case stRead:
		c = ReadServing{Step: step, Attempt: at, Keyspace: ks, Cell: st.Cell}
	case stWrite:
		c = WriteRecord{Step: step, Attempt: at, Expect: m.s.Rec.Version, Record: m.s.Next.Clone()}
	case stCreate:
		c = Create{Step: step, Attempt: at, Keyspace: ks, Workflow: wf, Cell: st.Cell, Source: slices.Clone(st.Source), Target: slices.Clone(st.Target)}
	case stCopy:
		c = Status{Step: step, Attempt: at, Keyspace: ks, Workflow: wf}
	case stVDiff:
		c = VDiff{Step: step, Attempt: at, Keyspace: ks, Workflow: wf, UUID: m.s.UUID}
	case stReads, stWrites, stUnswitchReads, stReverse:
		types, reverse, _ := m.switchOf()
		c = Switch{Step: step, Attempt: at, Keyspace: ks, Workflow: wf, Types: types, Reverse: reverse}
	case stVerify:
		c = Verify{Step: step, Attempt: at, Keyspace: ks, Shards: slices.Clone(st.Target)}
	case stComplete:
		c = Complete{Step: step, Attempt: at, Keyspace: ks, Workflow: wf}
	case stCancel:
		c = Cancel{Step: step, Attempt: at, Keyspace: ks, Workflow: wf}
	default:
		m.s.Sent = false
		return
	}
	m.out = append(m.out, c)
}

// switchOf is the traffic switch a stage asks for.
func (m *Machine) switchOf() (types []string, reverse, ok bool) {
	switch m.s.Stage {
	case stReads:
		return slices.Clone(readTypes), false, true
	case stWrites:
		return []string{"primary"}, false, true
	case stUnswitchReads:
		return slices.Clone(readTypes), true, true
	case stReverse:
		return slices.Clone(allTypes), true, true
	}
	return nil, false, false
}

// fits reports whether an answer is for the command in flight, and takes it.
func (m *Machine) fits(step string, attempt int) bool {
	if !m.s.Sent || step != m.stepID() || attempt != m.s.Attempt+1 {
		return false
	}
	m.s.Sent = false
	m.s.Attempt++
	return true
}

func (m *Machine) answer(ctx *machine.Ctx, in Input) {
	switch in := in.(type) {
	case Inspected:
		if m.s.Stage != stInspect || !m.fits(in.Step, in.Attempt) {
			return
		}
		if in.Err != nil {
			m.retry(ctx, ActInspect, in.Err.Error())
			return
		}
		problems := Check(m.s.Start.Source, m.s.Start.Target, in.Facts)
		ctx.Emit(Spec, ActInspect, machine.I("problems", int64(len(problems))))
		if len(problems) > 0 {
			reason := "pre-flight: " + strings.Join(problems, "; ")
			ctx.Emit(Spec, ActRefuse, machine.S("reason", reason))
			m.finish(ctx, Refused, reason)
			return
		}
		m.mirror(ctx, stCreate, 0)
	case Serving:
		if m.s.Stage != stRead || !m.fits(in.Step, in.Attempt) {
			return
		}
		if in.Err != nil {
			m.retry(ctx, ActMirror, in.Err.Error())
			return
		}
		serving := make([]string, len(in.Primary))
		for i, s := range in.Primary {
			serving[i] = s.Name
			if s.Range.String() != s.Name {
				m.retry(ctx, ActMirror, "shard "+s.Name+" serves range "+s.Range.String()+"; Vitess names shards by their range")
				return
			}
		}
		m.s.Serving = serving
		next, reason := m.mirrorRecord(m.s.Rec)
		if reason != "" {
			m.fail(ctx, ActMirror, reason)
			return
		}
		if next == nil && m.s.Start.Options.Mutants.RewriteSame {
			next = m.s.Rec.Clone()
		}
		if next == nil { // the record already mirrors it
			m.mirrored(ctx, m.s.Rec.Version, false)
			return
		}
		m.s.Next = next
		m.s.Stage = stWrite
		m.s.Attempt = 0
		m.send(ctx)
	case RecordWritten:
		if m.s.Stage != stWrite || !m.fits(in.Step, in.Attempt) {
			return
		}
		switch {
		case in.Err == nil && in.Conflict == nil:
			rec := m.s.Next.Clone()
			rec.Version = in.Version
			m.s.Rec = rec
			m.mirrored(ctx, in.Version, true)
		case in.Conflict != nil:
			if in.Conflict.Router != m.s.Rec.Router || m.s.Rebases >= maxRebases {
				m.fail(ctx, ActMirror, "the record keeps changing under the mirror (version "+strconv.FormatUint(in.Conflict.Version, 10)+"); stop the other writer and start again from the current record")
				return
			}
			next, reason := m.mirrorRecord(in.Conflict)
			if reason != "" {
				m.fail(ctx, ActMirror, reason)
				return
			}
			// Only a write that changed routing counts towards the bound: one that kept the
			// generation and phase (another controller's identical mirror, a field an
			// operator edited) is simply written over.
			if in.Conflict.Generation != m.s.Rec.Generation || in.Conflict.State != m.s.Rec.State {
				m.s.Rebases++
			}
			m.s.Rec = in.Conflict.Clone()
			if next == nil { // our own write whose answer was lost, or the same one
				m.mirrored(ctx, m.s.Rec.Version, false)
				return
			}
			m.s.Next = next
			m.s.Attempt = 0
			m.send(ctx)
		default:
			m.retry(ctx, ActMirror, in.Err.Error())
		}
	case Progress:
		if m.s.Stage != stCopy || !m.fits(in.Step, in.Attempt) {
			return
		}
		if in.Err != nil {
			m.retry(ctx, ActCopy, in.Err.Error())
			return
		}
		ctx.Emit(Spec, ActCopy, machine.B("copying", in.Copying), machine.I("lag_ms", in.LagMs), machine.I("rows", in.Rows), machine.S("failed", in.Failed))
		switch {
		case in.Failed != "":
			m.s.Reason = "the workflow's streams are in error (" + in.Failed + "); cancelled"
			m.turnBack(ctx)
		case m.s.CancelAsked:
			m.turnBack(ctx)
		case in.Copying || in.LagMs > m.s.Start.Options.MaxLagMs && !m.s.Start.Options.Mutants.IgnoreLag:
			m.poll(ctx)
		default:
			m.enter(ctx, stVDiff)
		}
	case Diffed:
		if m.s.Stage != stVDiff || !m.fits(in.Step, in.Attempt) {
			return
		}
		if in.Err != nil {
			m.retry(ctx, ActVDiff, in.Err.Error())
			return
		}
		ctx.Emit(Spec, ActVDiff, machine.B("done", in.Done), machine.S("mismatch", list(in.Mismatch)), machine.I("rows", in.Rows))
		switch {
		case m.s.CancelAsked:
			m.turnBack(ctx)
		case !in.Done:
			m.poll(ctx)
		case len(in.Mismatch) > 0:
			m.s.Reason = "VDiff " + m.s.UUID + " found rows that differ in " + list(in.Mismatch) + "; cancelled, nothing switched"
			m.turnBack(ctx)
		default:
			m.enter(ctx, stReads)
		}
	case Reply:
		m.onReply(ctx, in)
	}
}

const maxRebases = 8

func (m *Machine) onReply(ctx *machine.Ctx, in Reply) {
	switch m.s.Stage {
	case stCreate, stReads, stWrites, stVerify, stComplete, stUnswitchReads, stCancel, stReverse:
	default:
		return
	}
	if !m.fits(in.Step, in.Attempt) {
		return
	}
	act := map[stage]string{stCreate: ActCreate, stReads: ActSwitch, stWrites: ActSwitch, stVerify: ActVerify,
		stComplete: ActComplete, stUnswitchReads: ActSwitch, stCancel: ActCancel, stReverse: ActSwitch}[m.s.Stage]
	fs := []machine.Field{machine.I("attempt", int64(m.s.Attempt)), machine.B("ok", in.Err == nil)}
	if types, reverse, ok := m.switchOf(); ok {
		fs = append([]machine.Field{machine.S("types", list(types)), machine.B("reverse", reverse)}, fs...)
	}
	if in.Err != nil {
		fs = append(fs, machine.S("err", in.Err.Error()))
	}
	ctx.Emit(Spec, act, fs...)
	if in.Err != nil {
		switch {
		case m.s.Stage == stVerify && in.Permanent:
			m.s.Reason = "the check through vtgate failed after the switch (" + in.Err.Error() + "); traffic reversed to the source shards"
			ctx.Emit(Spec, ActReverse, machine.S("reason", m.s.Reason))
			m.enter(ctx, stReverse)
		case in.Permanent:
			m.fail(ctx, act, stageNames[m.s.Stage]+" refused for good ("+in.Err.Error()+")")
		default:
			m.retry(ctx, act, in.Err.Error())
		}
		return
	}
	switch m.s.Stage {
	case stCreate:
		m.mirror(ctx, stCopy, 0)
	case stReads:
		m.s.ReadsSwitched = true
		m.mirror(ctx, stWrites, 0)
	case stWrites:
		m.s.WritesSwitched = true
		if m.s.Start.Options.Mutants.SkipVerify {
			m.mirror(ctx, stHold, 0)
			return
		}
		m.mirror(ctx, stVerify, 0)
	case stVerify:
		m.s.Verified = true
		switch {
		case m.s.CancelAsked:
			m.turnBack(ctx)
		case m.s.Start.Options.Mutants.SkipHold:
			m.enter(ctx, stComplete)
		default:
			m.enter(ctx, stHold)
		}
	case stComplete:
		m.mirror(ctx, stDone, Completed)
	case stUnswitchReads:
		m.s.ReadsSwitched = false
		m.enter(ctx, stCancel)
	case stCancel:
		m.mirror(ctx, stDone, Cancelled)
	case stReverse:
		m.s.ReadsSwitched, m.s.WritesSwitched = false, false
		m.mirror(ctx, stDone, Reversed)
	}
}

// mirrored goes on after the record holds the serving partition.
func (m *Machine) mirrored(ctx *machine.Ctx, version uint64, wrote bool) {
	r := m.s.Rec
	fs := []machine.Field{machine.U("gen", r.Generation), machine.U("version", version), machine.S("layout", list(names(r.Layout)))}
	if r.Target != nil {
		fs = append(fs, machine.S("target", list(names(*r.Target))))
	}
	fs = append(fs, machine.B("wrote", wrote))
	ctx.Emit(Spec, ActMirror, fs...)
	after := m.s.After
	if m.s.CancelAsked && m.s.Final == 0 {
		m.turnBack(ctx)
		return
	}
	m.enter(ctx, after)
}

// turnBack cancels (the writes not switched) or reverses (switched). Every caller has set
// m.s.Reason: the operator's cancel or the failure that turns the reshard back.
func (m *Machine) turnBack(ctx *machine.Ctx) {
	switch {
	case m.s.WritesSwitched:
		ctx.Emit(Spec, ActReverse, machine.S("reason", m.s.Reason))
		m.enter(ctx, stReverse)
	case m.s.ReadsSwitched:
		m.enter(ctx, stUnswitchReads)
	default:
		m.enter(ctx, stCancel)
	}
}

func (m *Machine) cancelAsked(ctx *machine.Ctx) {
	if m.s.Stage == stIdle || m.s.CancelAsked {
		return
	}
	if m.s.Stage == stComplete || m.s.Final != 0 || m.s.Verified && m.s.Stage != stHold {
		m.out = append(m.out, Alert{Step: m.stepID(), Reason: "cancel asked too late: the reshard is completing or ending; reverse it with a new workflow if need be"})
		return
	}
	m.s.CancelAsked = true
	if m.s.Reason == "" {
		m.s.Reason = "cancelled by an operator"
	}
	ctx.Emit(Spec, ActCancel, machine.B("asked", true), machine.S("stage", stageNames[m.s.Stage]))
	switch {
	case m.s.Stage == stHold:
		// Holding after the switch: reverse the traffic now; finalize_after's timer is dropped.
		if m.s.RetryAt != 0 {
			m.out = append(m.out, cancelTimer(m.timerID()))
		}
		m.turnBack(ctx)
	case !m.s.Sent && m.s.Polling:
		// Waiting between polls: turn back now; the poll timer is dropped.
		m.out = append(m.out, cancelTimer(m.timerID()))
		m.turnBack(ctx)
	}
}

func cancelTimer(id string) Command { return cancelCmd{machine.CancelTimer{ID: id}} }

// cancelCmd drops a pending timer.
type cancelCmd struct{ machine.CancelTimer }

func (cancelCmd) isCommand()       {}
func (c cancelCmd) String() string { return "CancelTimer id=" + c.ID }

func (m *Machine) poll(ctx *machine.Ctx) {
	m.s.Polling = true
	m.s.Attempt = 0
	m.s.RetryAt = ctx.Now + m.s.Start.Options.PollEvery
	m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.timerID(), At: m.s.RetryAt}})
}

func (m *Machine) retry(ctx *machine.Ctx, act, err string) {
	opt := m.s.Start.Options
	m.s.Polling = false
	ctx.Emit(Spec, ActRetry, machine.S("step", stageNames[m.s.Stage]), machine.I("attempt", int64(m.s.Attempt)), machine.S("err", err))
	if m.s.Attempt >= opt.Attempts && !m.s.Alerted {
		m.s.Alerted = true
		m.out = append(m.out, Alert{Step: m.stepID(), Reason: act + " failed " + strconv.Itoa(m.s.Attempt) + " times (" + err + "); retrying until it succeeds or the reshard is cancelled"})
	}
	delay := opt.RetryAfter
	if ctx.Rand != nil && delay > 1 {
		delay += ctx.Rand.Int64N(delay/2 + 1)
	}
	m.s.RetryAt = ctx.Now + delay
	m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.timerID(), At: m.s.RetryAt}})
}

func (m *Machine) fail(ctx *machine.Ctx, act, reason string) {
	m.finish(ctx, Failed, act+": "+reason+m.where())
}

// where says what state Vitess was left in, for a Failed reason.
func (m *Machine) where() string {
	switch {
	case m.s.WritesSwitched:
		return "; the writes are on the target shards (reverse: vtctldclient Reshard ReverseTraffic)"
	case m.s.ReadsSwitched:
		return "; the reads are on the target shards, the writes on the source"
	}
	return "; the source shards serve"
}

// steps is the sequential skeleton's part of this machine (machine.Steps).
var steps = machine.Steps{Spec: Spec, Restart: ActRestart, Done: ActDone}

func (m *Machine) restart(ctx *machine.Ctx) {
	if m.s.Stage == stIdle {
		return
	}
	if m.s.Start.Options.Mutants.ForgetSent && m.s.Stage == stVDiff {
		m.s.UUID = newUUID(ctx)
	}
	steps.Resume(ctx, stageNames[m.s.Stage], m.s.Sent, m.s.RetryAt, func() { m.send(ctx) },
		func(at int64) { m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.timerID(), At: at}}) })
}

func (m *Machine) finish(ctx *machine.Ctx, o Outcome, reason string) {
	m.s.Stage, m.s.Sent, m.s.Outcome, m.s.Reason = stDone, false, o, reason
	m.emitDone(ctx)
}

func (m *Machine) emitDone(ctx *machine.Ctx) {
	gen := uint64(0)
	if m.s.Rec != nil {
		gen = m.s.Rec.Generation
	}
	steps.End(ctx, m.s.Outcome.String(), gen)
	m.out = append(m.out, Done{Outcome: m.s.Outcome, Generation: gen, Reason: m.s.Reason})
}
