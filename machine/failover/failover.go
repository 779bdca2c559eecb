package failover

import (
	"slices"
	"strconv"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Spec is the TLA+ spec the machine's events belong to.
const Spec = "PrimaryFailover"

// The actions the machine emits. Results of commands carry ok (and err when false).
const (
	// ActStart: a Start was accepted; fields db, shard, gen, router.
	ActStart = "Start"
	// ActRefuse: a Start was refused and nothing was done; fields reason.
	ActRefuse = "Refuse"
	// ActFence: the old primary's fence answered; fields shard, attempt, ok (and err).
	ActFence = "Fence"
	// ActFenceSkipped: the old primary could not be fenced after Attempts tries (it is
	// down or cut off, the usual reason for a failover); fields shard.
	ActFenceSkipped = "FenceSkipped"
	// ActReparent: TabletExternallyReparented answered; fields shard, tablet, attempt, ok.
	ActReparent = "Reparent"
	// ActRepoint: the compare-and-set of the record answered; fields shard, gen, attempt,
	// ok (and version, or err).
	ActRepoint = "Repoint"
	// ActRebase: the record changed under the repoint without touching this shard's
	// backend; the change is made again on top; fields gen, version.
	ActRebase = "Rebase"
	// ActPush: the new generation was handed to ConfigPush; fields gen, attempt, ok.
	ActPush = "Push"
	// ActRestart: the machine was restored and re-issued what was in flight; fields stage.
	ActRestart = "Restart"
	// ActDone: the failover ended; fields outcome, gen.
	ActDone = "Done"
)

type stage uint8

const (
	stIdle stage = iota
	stFence
	stReparent
	stRepoint
	stPush
	stDone
)

var stageNames = [...]string{"idle", "fence", "reparent", "repoint", "push", "done"}

// state is everything the machine knows; Snapshot carries it whole.
type state struct {
	Start   Start
	Rec     *shardmap.Record // last record known stored
	Next    *shardmap.Record // what the WriteRecord in flight stores
	Stage   stage
	Sent    bool // the stage's command is out and unanswered
	Attempt int
	Rebases int
	RetryAt int64 // when a failed command is sent again; 0 when none waits
	Alerted bool
	Fenced  bool
	Outcome Outcome
	Reason  string
}

// Machine repoints one shard after one promotion. It holds state only.
type Machine struct {
	s   state
	out []Command
}

// New returns an idle machine; feed it Start.
func New() *Machine { return &Machine{} }

// On consumes one input and returns the commands to execute. Answers that do not match
// the command in flight (late, duplicated, or for an earlier stage) change nothing.
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
	case Reply:
		m.onReply(ctx, in)
	case RecordWritten:
		m.onRecord(ctx, in)
	case TimerFired:
		if m.s.Stage != stIdle && !m.s.Sent && m.s.RetryAt != 0 && in.ID == m.retryID() {
			m.s.RetryAt = 0
			m.send(ctx)
		}
	}
	return m.take()
}

func (m *Machine) take() []Command {
	out := m.out
	m.out = nil
	return out
}

// Done reports whether the failover has ended, and how.
func (m *Machine) Done() (Outcome, bool) { return m.s.Outcome, m.s.Stage == stDone }

func (m *Machine) start(ctx *machine.Ctx, in Start) {
	if m.s.Stage != stIdle {
		return
	}
	in.Options = in.Options.withDefaults()
	in.Record = in.Record.Clone()
	in.Promoted.Replicas = slices.Clone(in.Promoted.Replicas)
	m.s.Start = in
	m.s.Rec = in.Record.Clone()
	if reason := checkStart(in); reason != "" {
		ctx.Emit(Spec, ActRefuse, machine.S("reason", reason))
		m.finish(ctx, Refused, reason)
		return
	}
	r := in.Record
	ctx.Emit(Spec, ActStart, machine.S("db", r.Router.Name), machine.S("shard", in.Shard),
		machine.U("gen", r.Generation), machine.S("router", r.Router.Kind.String()))
	m.enter(ctx, stFence)
}

func checkStart(in Start) string {
	r := in.Record
	switch {
	case r == nil:
		return "start: no record"
	case in.Promoted.Host == "" || in.Promoted.Port == 0:
		return "start: the promoted primary has no host:port"
	case r.Router.Kind == shardmap.Vitess && in.Promoted.Tablet == "":
		return "start: the promoted primary of a Vitess shard needs its tablet alias for TabletExternallyReparented"
	case r.Router.Kind == shardmap.PgDog && in.Role == "":
		return "start: no application role to fence on the old primary"
	}
	if err := r.Validate(); err != nil {
		return "start: record is invalid: " + err.Error()
	}
	if _, _, ok := findShard(r, in.Shard); !ok {
		return "start: shard " + strconv.Quote(in.Shard) + " is not in the record's layout or target"
	}
	return ""
}

// findShard returns the layout holding shard name (the serving one first, then the
// reshard target) and its index.
func findShard(r *shardmap.Record, name string) (*shardmap.Layout, int, bool) {
	for _, l := range []*shardmap.Layout{&r.Layout, r.Target} {
		if l == nil {
			continue
		}
		for i := range l.Shards {
			if l.Shards[i].Name == name {
				return l, i, true
			}
		}
	}
	return nil, 0, false
}

func sameEndpoint(a, b shardmap.Backend) bool { return a.Host == b.Host && a.Port == b.Port }

// old is the backend the record names for the shard when the failover started.
func (m *Machine) old() shardmap.Backend {
	l, i, _ := findShard(m.s.Start.Record, m.s.Start.Shard)
	return l.Shards[i].Backend
}

// repoint is the record with the promoted primary in place of the old one, at a new
// generation (a reshard in progress keeps its target one generation ahead).
func (m *Machine) repoint(cur *shardmap.Record) (*shardmap.Record, bool) {
	c := cur.Clone()
	l, i, ok := findShard(c, m.s.Start.Shard)
	if !ok {
		return nil, false
	}
	// The promoted primary keeps the replicas Start names; without any, the shard keeps
	// its replicas but the promoted one (the old primary is not one: it is fenced).
	p := m.s.Start.Promoted
	p.Replicas = slices.Clone(p.Replicas)
	if len(p.Replicas) == 0 {
		p.Replicas = slices.DeleteFunc(slices.Clone(l.Shards[i].Backend.Replicas), func(e shardmap.Endpoint) bool {
			return e.Host == p.Host && e.Port == p.Port
		})
	}
	l.Shards[i].Backend = p
	l.Shards[i].Fence = shardmap.FenceOpen
	c.Generation = cur.Generation + 1
	if m.s.Start.Options.Mutants.KeepGeneration {
		c.Generation = cur.Generation
	}
	if c.State.To != 0 && c.State.To <= c.Generation {
		c.State.To = c.Generation + 1
	}
	return c, true
}

// repointed reports whether r already names the promoted primary for the shard.
func (m *Machine) repointed(r *shardmap.Record) bool {
	l, i, ok := findShard(r, m.s.Start.Shard)
	return ok && sameEndpoint(l.Shards[i].Backend, m.s.Start.Promoted) && r.Generation > m.s.Start.Record.Generation
}

func (m *Machine) isVitess() bool { return m.s.Start.Record.Router.Kind == shardmap.Vitess }

// after is the stage that follows st. Vitess routes by its own topology, so the tablet
// is reparented first and the record mirrors it; PgDog routes by the files rendered from
// the record, so the record comes first and ConfigPush carries it out.
func (m *Machine) after(st stage) stage {
	var seq []stage
	mu := m.s.Start.Options.Mutants
	switch {
	case m.isVitess() && mu.RecordBeforeReparent:
		seq = []stage{stFence, stRepoint, stReparent}
	case m.isVitess():
		seq = []stage{stFence, stReparent, stRepoint}
	case mu.PushBeforeRecord:
		seq = []stage{stFence, stPush, stRepoint}
	default:
		seq = []stage{stFence, stRepoint, stPush}
	}
	for i, s := range seq {
		if s == st && i+1 < len(seq) {
			return seq[i+1]
		}
	}
	return stDone
}

func (m *Machine) enter(ctx *machine.Ctx, st stage) {
	m.s.Stage = st
	m.s.Attempt, m.s.Rebases, m.s.Alerted, m.s.RetryAt = 0, 0, false, 0
	switch st {
	case stFence:
		if sameEndpoint(m.old(), m.s.Start.Promoted) {
			// The record already names the promoted primary: nothing to fence.
			m.enter(ctx, m.after(st))
			return
		}
		if m.s.Start.Options.Mutants.SkipFence {
			m.enter(ctx, m.after(st))
			return
		}
	case stRepoint:
		if m.repointed(m.s.Rec) {
			m.enter(ctx, m.after(st))
			return
		}
		next, _ := m.repoint(m.s.Rec)
		m.s.Next = next
	case stDone:
		m.finish(ctx, Repointed, "")
		return
	}
	m.send(ctx)
}

// stepID names the command in flight. A record write carries the version it expects
// ("@<version>"): a rebased write is a different request, so a late answer to the one it
// replaced cannot be taken for its own.
func (m *Machine) stepID() string {
	r := m.s.Start.Record
	s := r.Router.Name + "/" + m.s.Start.Shard + "/" + strconv.FormatUint(r.Generation, 10) + "/" + stageNames[m.s.Stage]
	if m.s.Stage == stRepoint {
		s += "@" + strconv.FormatUint(m.s.Rec.Version, 10)
	}
	return s
}

func (m *Machine) retryID() string { return "retry:" + m.stepID() }

func (m *Machine) send(ctx *machine.Ctx) {
	m.s.Sent = true
	step, st, at := m.stepID(), m.s.Start, m.s.Attempt+1
	switch m.s.Stage {
	case stFence:
		m.out = append(m.out, FenceOld{Step: step, Attempt: at, Shard: st.Shard, Backend: m.old(), Role: st.Role})
	case stReparent:
		m.out = append(m.out, Reparent{Step: step, Attempt: at, Keyspace: st.Record.Router.Name, Shard: st.Shard, Tablet: st.Promoted.Tablet})
	case stRepoint:
		m.out = append(m.out, WriteRecord{Step: step, Attempt: at, Expect: m.s.Rec.Version, Record: m.s.Next})
	case stPush:
		rec := m.s.Rec
		if m.s.Start.Options.Mutants.PushBeforeRecord && !m.repointed(rec) {
			rec, _ = m.repoint(rec)
		}
		m.out = append(m.out, Push{Step: step, Attempt: at, Generation: rec.Generation, Record: rec})
	}
}

func (m *Machine) action() string {
	switch m.s.Stage {
	case stFence:
		return ActFence
	case stReparent:
		return ActReparent
	case stRepoint:
		return ActRepoint
	}
	return ActPush
}

func (m *Machine) emit(ctx *machine.Ctx, ok bool, err string, extra ...machine.Field) {
	fs := []machine.Field{machine.S("shard", m.s.Start.Shard)}
	switch m.s.Stage {
	case stReparent:
		fs = append(fs, machine.S("tablet", m.s.Start.Promoted.Tablet))
	case stRepoint:
		fs = append(fs, machine.U("gen", m.s.Next.Generation))
	case stPush:
		fs = append(fs, machine.U("gen", m.s.Rec.Generation))
	}
	fs = append(fs, machine.I("attempt", int64(m.s.Attempt)))
	fs = append(fs, extra...)
	fs = append(fs, machine.B("ok", ok))
	if !ok {
		fs = append(fs, machine.S("err", err))
	}
	ctx.Emit(Spec, m.action(), fs...)
}

func (m *Machine) onReply(ctx *machine.Ctx, in Reply) {
	if !m.s.Sent || m.s.Stage == stRepoint || in.Step != m.stepID() || in.Attempt != m.s.Attempt+1 {
		return
	}
	m.s.Sent = false
	m.s.Attempt++
	if in.Err == nil {
		m.emit(ctx, true, "")
		if m.s.Stage == stFence {
			m.s.Fenced = true
		}
		m.enter(ctx, m.after(m.s.Stage))
		return
	}
	m.emit(ctx, false, in.Err.Error())
	if in.Permanent && m.s.Stage != stFence && !m.s.Start.Options.Mutants.RetryPermanent {
		// Retrying cannot help (a tablet of another shard stays one): stop with the record
		// as it is, saying what was done and what to do.
		reason := m.action() + " of shard " + m.s.Start.Shard + " refused for good (" + in.Err.Error() + "); the record is unchanged"
		if m.s.Stage == stReparent {
			reason += " and nothing was reparented; start the failover again naming a tablet of " +
				m.s.Start.Record.Router.Name + "/" + m.s.Start.Shard + " (vtctldclient GetTablets --keyspace " + m.s.Start.Record.Router.Name + " --shard " + m.s.Start.Shard + ")"
		}
		if m.s.Fenced {
			reason += "; the old primary " + backendAddr(m.old()) + " is fenced, so the shard takes no writes until then"
		}
		m.finish(ctx, Failed, reason)
		return
	}
	if m.s.Stage == stFence && (m.s.Attempt >= m.s.Start.Options.Attempts || in.Permanent) {
		// The old primary is down or cut off (the usual reason for a failover): go on. If
		// it comes back, the routers no longer point at it once the record is pushed.
		ctx.Emit(Spec, ActFenceSkipped, machine.S("shard", m.s.Start.Shard))
		if m.s.Start.Options.Mutants.ClaimFenced {
			m.s.Fenced = true
		}
		m.out = append(m.out, Alert{Step: in.Step, Reason: "old primary " + backendAddr(m.old()) + " of shard " + m.s.Start.Shard +
			" could not be fenced (" + in.Err.Error() + "); fence it by hand if it comes back before every router has the new generation"})
		m.enter(ctx, m.after(m.s.Stage))
		return
	}
	m.retry(ctx, in.Err.Error())
}

// retry sends the stage's command again after a jittered delay. Past Attempts it alerts
// once and keeps trying: the shard has no writable primary in its routers until this
// stage succeeds, so there is nothing safer to do than insist.
func (m *Machine) retry(ctx *machine.Ctx, err string) {
	opt := m.s.Start.Options
	if m.s.Attempt >= opt.Attempts && !m.s.Alerted {
		m.s.Alerted = true
		m.out = append(m.out, Alert{Step: m.stepID(), Reason: m.action() + " of shard " + m.s.Start.Shard + " failed " +
			strconv.Itoa(m.s.Attempt) + " times (" + err + "); retrying until it succeeds"})
	}
	delay := opt.RetryAfter
	if ctx.Rand != nil && delay > 1 {
		delay += ctx.Rand.Int64N(delay/2 + 1)
	}
	m.s.RetryAt = ctx.Now + delay
	m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.retryID(), At: m.s.RetryAt}})
}

func (m *Machine) onRecord(ctx *machine.Ctx, in RecordWritten) {
	if !m.s.Sent || m.s.Stage != stRepoint || in.Step != m.stepID() || in.Attempt != m.s.Attempt+1 {
		return
	}
	m.s.Sent = false
	m.s.Attempt++
	switch {
	case in.Err == nil && in.Conflict == nil:
		rec := m.s.Next.Clone()
		rec.Version = in.Version
		m.s.Rec = rec
		m.emit(ctx, true, "", machine.U("version", in.Version))
		m.enter(ctx, m.after(stRepoint))
	case in.Conflict != nil && m.repointed(in.Conflict):
		// Our own write whose answer was lost, or someone else repointed it the same way.
		m.s.Rec = in.Conflict.Clone()
		m.emit(ctx, true, "", machine.U("version", in.Conflict.Version), machine.B("retry", true))
		m.enter(ctx, m.after(stRepoint))
	case in.Conflict != nil:
		next, ok := m.repoint(in.Conflict)
		if !ok || m.s.Rebases >= maxRebases {
			reason := "shard " + m.s.Start.Shard + " is no longer in the record (version " + strconv.FormatUint(in.Conflict.Version, 10) + "); repoint it by hand if it still serves"
			if ok {
				reason = "the record keeps changing under the repoint; retry the failover from the current record"
			}
			m.emit(ctx, false, reason)
			m.s.Rec = in.Conflict.Clone()
			m.finish(ctx, Failed, reason)
			return
		}
		// The compare-and-set answered (lost), like every other answer it is a Repoint
		// event: without it a trace would show the rebased write's attempt and no answer
		// to the one before (the PrimaryFailover model's Repoint, spec/failover_replay_test.go).
		m.emit(ctx, false, "conflict: the record is at version "+strconv.FormatUint(in.Conflict.Version, 10))
		m.s.Rebases++
		ctx.Emit(Spec, ActRebase, machine.U("gen", next.Generation), machine.U("version", in.Conflict.Version))
		m.s.Rec, m.s.Next = in.Conflict.Clone(), next
		m.send(ctx)
	default:
		m.emit(ctx, false, in.Err.Error())
		m.retry(ctx, in.Err.Error())
	}
}

// maxRebases bounds how often the repoint is made again on top of someone else's write.
const maxRebases = 8

// steps is the sequential skeleton's part of this machine (machine.Steps).
var steps = machine.Steps{Spec: Spec, Restart: ActRestart, Done: ActDone}

func (m *Machine) restart(ctx *machine.Ctx) {
	if m.s.Stage == stIdle {
		return
	}
	steps.Resume(ctx, stageNames[m.s.Stage], m.s.Sent, m.s.RetryAt, func() { m.send(ctx) },
		func(at int64) { m.out = append(m.out, SetTimer{machine.SetTimer{ID: m.retryID(), At: at}}) })
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
	m.out = append(m.out, Done{Outcome: m.s.Outcome, Generation: gen, Fenced: m.s.Fenced, Reason: m.s.Reason})
}
