package configpush

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/machine"
)

// Machine pushes generations of one database's router files to its router instances. It is
// a plain value: no clients, no clock, no goroutines. Make one with New or Restore.
type Machine struct {
	opts Options
	s    Snapshot
	out  []Command // the commands of the current On call
}

// New returns an idle machine.
func New(opts Options) *Machine {
	return &Machine{opts: opts.WithDefaults()}
}

// On consumes one input and returns the commands to execute (see Command for the driver's
// obligations). It never blocks and never does I/O.
func (m *Machine) On(ctx *machine.Ctx, in Input) []Command {
	m.out = nil
	switch in := in.(type) {
	case Push:
		m.push(ctx, in)
	case FilesWritten:
		m.filesWritten(ctx, in)
	case Reloaded:
		m.reloaded(ctx, in)
	case Observed:
		m.observed(ctx, in)
	case FilesSeen:
		m.filesSeen(ctx, in)
	case TimerFired:
		m.timer(ctx, in.ID)
	case Restarted:
		m.restarted(ctx)
	}
	out := m.out
	m.out = nil
	return out
}

// Step ids and timer ids. An instance has one timer for whichever of its steps runs; the
// files step has its own.
func filesStep(gen uint64) string { return "g" + strconv.FormatUint(gen, 10) + "/files" }
func reloadStep(gen uint64, id string) string {
	return "g" + strconv.FormatUint(gen, 10) + "/reload/" + id
}
func visibleStep(gen uint64, id string) string {
	return "g" + strconv.FormatUint(gen, 10) + "/visible/" + id
}
func observeStep(gen uint64, id string) string {
	return "g" + strconv.FormatUint(gen, 10) + "/observe/" + id
}
func instanceTimer(gen uint64, id string) string {
	return "g" + strconv.FormatUint(gen, 10) + "/instance/" + id
}

func (m *Machine) emit(c Command) { m.out = append(m.out, c) }

func (m *Machine) setTimer(id string, at int64) {
	m.emit(SetTimer{machine.SetTimer{ID: id, At: at}})
}

func (m *Machine) cancelTimer(id string) {
	m.emit(CancelTimer{machine.CancelTimer{ID: id}})
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// --- Push ---------------------------------------------------------------------------------

func (m *Machine) push(ctx *machine.Ctx, p Push) {
	if reason := m.refusal(p); reason != "" {
		published := uint64(0)
		if p.Record != nil {
			published = p.Record.Generation
		}
		ctx.Emit(Spec, ActRefuse, machine.U("gen", p.Generation), machine.U("published", published), machine.S("reason", reason))
		m.emit(Outcome{Generation: p.Generation, Refused: reason})
		return
	}
	if m.s.Database == "" {
		m.s.Database = p.Record.Router.Name
	}
	ids := dedupe(p.Instances)
	cur := m.s.Push
	digest := p.Files.Digest()
	switch {
	case cur != nil && p.Generation == cur.Generation && digest == cur.Digest:
		if cur.Files == nil {
			cur.Files = p.Files // a restored push that ended without its files
		}
		m.repush(ctx, cur, ids)
	case cur != nil && p.Generation == cur.Generation:
		m.refresh(ctx, cur, p, ids)
	default:
		if cur != nil && !cur.Done {
			m.supersede(ctx, cur, p.Generation)
		}
		m.start(ctx, p, ids)
	}
}

// refusal says why p must not be pushed, or "".
func (m *Machine) refusal(p Push) string {
	r := p.Record
	switch {
	case r == nil:
		return "no record: push only a record read from the shard map store"
	case r.Version == 0:
		return "the record has version 0, so it was never stored; push only a record read from the shard map store"
	case p.Generation == 0:
		return "generation 0 is never published (generations start at 1)"
	case m.s.Database != "" && r.Router.Name != m.s.Database:
		return fmt.Sprintf("the record is for database %q but this machine pushes %q", r.Router.Name, m.s.Database)
	case p.Generation != r.Generation && !(m.opts.Mutant == MutantWriteUnpublished && p.Generation > r.Generation):
		return fmt.Sprintf("generation %d is not the record's published generation %d: files may be written only for the generation the store publishes (§6.4), since any instance may restart and read them", p.Generation, r.Generation)
	case len(p.Files) == 0:
		return "no files to write"
	case slices.Contains(p.Instances, ""):
		return "an instance id is empty"
	}
	if m.opts.Mutant != MutantRegress {
		if newest := m.newest(); p.Generation < newest {
			return fmt.Sprintf("generation %d is older than generation %d, already written or being pushed; generations only increase", p.Generation, newest)
		}
	}
	return ""
}

// newest is the highest generation written or being pushed.
func (m *Machine) newest() uint64 {
	g := m.s.Written
	if m.s.Push != nil {
		g = max(g, m.s.Push.Generation)
	}
	return g
}

func dedupe(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func (m *Machine) start(ctx *machine.Ctx, p Push, ids []string) {
	pr := &Progress{Generation: p.Generation, Version: p.Record.Version, Files: p.Files, Digest: p.Files.Digest()}
	pr.Instances = make([]Instance, len(ids))
	for i, id := range ids {
		pr.Instances[i] = Instance{ID: id, Stage: StageFiles}
	}
	m.s.Push = pr
	ctx.Emit(Spec, ActPush, machine.U("gen", pr.Generation), machine.U("version", pr.Version),
		machine.I("instances", int64(len(ids))), machine.I("added", int64(len(ids))))
	pr.FilesStep = Step{Limit: m.opts.MaxAttempts}
	if m.s.Stray != nil {
		pr.FilesStep.State = StepQueued
		return
	}
	m.issueFiles(ctx, pr)
}

// repush handles a Push for the generation already pushed: new instances join, and if the
// push had ended, stuck instances (or a files step that gave up) get a fresh budget.
func (m *Machine) repush(ctx *machine.Ctx, pr *Progress, ids []string) {
	var added []Instance
	for _, id := range ids {
		if _, ok := pr.find(id); !ok {
			added = append(added, Instance{ID: id, Stage: StageFiles})
		}
	}
	retry := pr.Done && (pr.FilesErr != "" || slices.ContainsFunc(pr.Instances, func(in Instance) bool { return in.Stage == StageStuck }))
	if len(added) == 0 && !retry {
		return // a duplicate: nothing to do
	}
	pr.Instances = append(pr.Instances, added...)
	slices.SortFunc(pr.Instances, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	ctx.Emit(Spec, ActPush, machine.U("gen", pr.Generation), machine.U("version", pr.Version),
		machine.I("instances", int64(len(pr.Instances))), machine.I("added", int64(len(added))))
	wasDone := pr.Done
	pr.Done = false
	if pr.FilesErr != "" || pr.FilesStep.State != StepDone {
		if wasDone { // the files step gave up: start it again with a fresh budget
			pr.FilesErr = ""
			pr.FilesStep.Limit = pr.FilesStep.Attempt + m.opts.MaxAttempts
			if m.s.Stray != nil { // a restored push's write may still land
				pr.FilesStep.State = StepQueued
			} else {
				m.issueFiles(ctx, pr)
			}
		}
		return // instances wait in StageFiles
	}
	for i := range pr.Instances {
		in := &pr.Instances[i]
		switch in.Stage {
		case StageFiles:
			m.begin(ctx, pr, in)
		case StageStuck:
			in.Stage, in.Failed = in.Failed, ""
			st := in.step()
			st.Limit = st.Attempt + m.opts.MaxAttempts
			m.issueInstance(ctx, pr, in)
		}
	}
	m.maybeDone(ctx, pr)
}

// refresh replaces pr by a push of the same generation with other files: what a
// generation's files are includes its credentials, so a rotated password is pushed (written
// and reloaded everywhere) like a new generation. Step ids stay those of the generation, so
// attempts go on from where pr left them and replies to pr's attempts are not taken (From).
// A files write of pr still in flight becomes the stray the new write waits for, so the
// old files never land after the new ones.
func (m *Machine) refresh(ctx *machine.Ctx, pr *Progress, p Push, ids []string) {
	if !pr.Done {
		m.supersede(ctx, pr, p.Generation)
	}
	next := &Progress{Generation: p.Generation, Version: p.Record.Version, Files: p.Files, Digest: p.Files.Digest()}
	next.FilesStep = Step{Attempt: pr.FilesStep.Attempt, From: pr.FilesStep.Attempt, Limit: pr.FilesStep.Attempt + m.opts.MaxAttempts}
	old := map[string]Instance{}
	for _, in := range pr.Instances {
		old[in.ID] = in
	}
	for _, id := range dedupe(append(ids, pr.ids()...)) {
		in := Instance{ID: id, Stage: StageFiles}
		if o, ok := old[id]; ok {
			in.Reload = Step{Attempt: o.Reload.Attempt, From: o.Reload.Attempt}
			in.Observe = Step{Attempt: o.Observe.Attempt, From: o.Observe.Attempt}
			in.Visible = Step{Attempt: o.Visible.Attempt, From: o.Visible.Attempt}
		}
		next.Instances = append(next.Instances, in)
	}
	m.s.Push = next
	ctx.Emit(Spec, ActPush, machine.U("gen", next.Generation), machine.U("version", next.Version),
		machine.I("instances", int64(len(next.Instances))), machine.I("added", int64(len(next.Instances))))
	if m.s.Stray != nil {
		next.FilesStep.State = StepQueued
		return
	}
	m.issueFiles(ctx, next)
}

func (pr *Progress) ids() []string {
	out := make([]string, len(pr.Instances))
	for i, in := range pr.Instances {
		out[i] = in.ID
	}
	return out
}

// supersede ends pr because gen replaces it.
func (m *Machine) supersede(ctx *machine.Ctx, pr *Progress, gen uint64) {
	ctx.Emit(Spec, ActSupersede, machine.U("gen", pr.Generation), machine.U("by", gen))
	switch pr.FilesStep.State {
	case StepAwaiting:
		if m.opts.Mutant == MutantNoStrayWait {
			break
		}
		m.s.Stray = &Stray{Generation: pr.Generation, Step: filesStep(pr.Generation), Attempt: pr.FilesStep.Attempt, At: pr.FilesStep.At}
	case StepBackoff:
		m.cancelTimer(filesStep(pr.Generation))
	}
	for i := range pr.Instances {
		in := &pr.Instances[i]
		if !in.Stage.Terminal() && in.Stage != StageFiles {
			m.cancelTimer(instanceTimer(pr.Generation, in.ID))
		}
	}
	o := pr.outcome()
	o.SupersededBy = gen
	m.emit(o)
}

// --- Files --------------------------------------------------------------------------------

func (m *Machine) issueFiles(ctx *machine.Ctx, pr *Progress) {
	st := &pr.FilesStep
	st.Attempt++
	st.State = StepAwaiting
	st.At = ctx.Now + ms(m.opts.StepTimeout)
	m.emit(WriteFiles{Step: filesStep(pr.Generation), Attempt: st.Attempt, Generation: pr.Generation, Files: pr.Files})
	m.setTimer(filesStep(pr.Generation), st.At)
	if m.opts.Mutant == MutantReloadEarly {
		for i := range pr.Instances {
			if in := &pr.Instances[i]; in.Stage == StageFiles {
				m.begin(ctx, pr, in)
			}
		}
	}
}

func (m *Machine) filesWritten(ctx *machine.Ctx, r FilesWritten) {
	if s := m.s.Stray; s != nil && r.Step == s.Step && r.Attempt == s.Attempt {
		ctx.Emit(Spec, ActWriteFiles, withErr([]machine.Field{machine.U("gen", s.Generation), machine.I("attempt", int64(r.Attempt)), machine.B("ok", r.Err == nil)}, r.Err)...)
		if r.Err == nil {
			m.s.Written = max(m.s.Written, s.Generation)
		}
		m.endStray(ctx)
		return
	}
	pr := m.s.Push
	if pr == nil || pr.Done || r.Step != filesStep(pr.Generation) || !accepts(pr.FilesStep, r.Attempt, r.Err) {
		return // late, stale or duplicate
	}
	ctx.Emit(Spec, ActWriteFiles, withErr([]machine.Field{machine.U("gen", pr.Generation), machine.I("attempt", int64(r.Attempt)), machine.B("ok", r.Err == nil)}, r.Err)...)
	if r.Err != nil {
		if errors.Is(r.Err, ErrNewerGeneration) {
			m.cancelTimer(filesStep(pr.Generation))
			pr.FilesStep.State, pr.FilesStep.Err = StepDone, r.Err.Error()
			pr.FilesErr = r.Err.Error()
			m.finish(ctx, pr)
			return
		}
		m.failFiles(ctx, pr, r.Err.Error())
		return
	}
	m.cancelTimer(filesStep(pr.Generation))
	pr.FilesStep.State, pr.FilesStep.Err = StepDone, ""
	m.s.Written = max(m.s.Written, pr.Generation)
	for i := range pr.Instances {
		in := &pr.Instances[i]
		if in.Stage == StageFiles {
			m.begin(ctx, pr, in)
		}
	}
	m.maybeDone(ctx, pr)
}

// endStray forgets the stray write and lets the queued one go.
func (m *Machine) endStray(ctx *machine.Ctx) {
	m.s.Stray = nil
	if pr := m.s.Push; pr != nil && pr.FilesStep.State == StepQueued {
		m.issueFiles(ctx, pr)
	}
}

func (m *Machine) failFiles(ctx *machine.Ctx, pr *Progress, err string) {
	st := &pr.FilesStep
	st.Err = err
	if st.Attempt >= st.Limit {
		ctx.Emit(Spec, ActGiveUp, machine.U("gen", pr.Generation), machine.S("step", filesStep(pr.Generation)), machine.I("attempts", int64(st.Attempt)))
		m.cancelTimer(filesStep(pr.Generation))
		st.State = StepDone
		pr.FilesErr = err
		if m.opts.Mutant == MutantSilentGiveUp {
			return
		}
		m.finish(ctx, pr)
		return
	}
	m.backoff(ctx, st, filesStep(pr.Generation))
}

// --- Instances ----------------------------------------------------------------------------

func (pr *Progress) find(id string) (int, bool) {
	return slices.BinarySearchFunc(pr.Instances, id, func(in Instance, id string) int { return strings.Compare(in.ID, id) })
}

// begin starts an instance's steps once the files are written: with Options.AwaitFiles
// it first waits until the instance sees them, else it is reloaded at once.
func (m *Machine) begin(ctx *machine.Ctx, pr *Progress, in *Instance) {
	if m.opts.AwaitFiles {
		in.Stage = StageVisible
		in.Visible.Limit = in.Visible.Attempt + m.opts.AwaitAttempts
	} else {
		in.Stage = StageReload
		in.Reload.Limit = in.Reload.Attempt + m.opts.MaxAttempts
	}
	m.issueInstance(ctx, pr, in)
}

// step is the instance's running step.
func (in *Instance) step() *Step {
	switch in.Stage {
	case StageObserve:
		return &in.Observe
	case StageVisible:
		return &in.Visible
	}
	return &in.Reload
}

func (in *Instance) stepID(gen uint64) string {
	switch in.Stage {
	case StageObserve:
		return observeStep(gen, in.ID)
	case StageVisible:
		return visibleStep(gen, in.ID)
	}
	return reloadStep(gen, in.ID)
}

// issueInstance issues the next attempt of the instance's running step.
func (m *Machine) issueInstance(ctx *machine.Ctx, pr *Progress, in *Instance) {
	st := in.step()
	st.Attempt++
	st.State = StepAwaiting
	st.At = ctx.Now + ms(m.opts.StepTimeout)
	m.emitInstanceCommand(pr, in)
	m.setTimer(instanceTimer(pr.Generation, in.ID), st.At)
}

func (m *Machine) emitInstanceCommand(pr *Progress, in *Instance) {
	st := in.step()
	switch in.Stage {
	case StageObserve:
		m.emit(Observe{Step: observeStep(pr.Generation, in.ID), Attempt: st.Attempt, Instance: in.ID, Generation: pr.Generation})
	case StageVisible:
		m.emit(AwaitFiles{Step: visibleStep(pr.Generation, in.ID), Attempt: st.Attempt, Instance: in.ID, Generation: pr.Generation})
	default:
		m.emit(Reload{Step: reloadStep(pr.Generation, in.ID), Attempt: st.Attempt, Instance: in.ID, Generation: pr.Generation, Files: pr.Files})
	}
}

// accepts says whether a reply to attempt of a step in state st is taken: a success of any
// attempt already issued while the step still waits (the same step, so the same effect), or
// a failure of the attempt now awaited. Everything else is late news.
func accepts(st Step, attempt int, err error) bool {
	if attempt < 1 || attempt <= st.From || attempt > st.Attempt {
		return false
	}
	if err == nil {
		return st.State == StepAwaiting || st.State == StepBackoff
	}
	return st.State == StepAwaiting && attempt == st.Attempt
}

// replyTarget finds the instance a reply is for, if the reply is current.
func (m *Machine) replyTarget(step, id string, stage Stage, attempt int, err error) (*Progress, *Instance) {
	pr := m.s.Push
	if pr == nil || pr.Done {
		return nil, nil
	}
	i, ok := pr.find(id)
	if !ok {
		return nil, nil
	}
	in := &pr.Instances[i]
	if in.Stage != stage || step != in.stepID(pr.Generation) || !accepts(*in.step(), attempt, err) {
		return nil, nil
	}
	return pr, in
}

func (m *Machine) reloaded(ctx *machine.Ctx, r Reloaded) {
	pr, in := m.replyTarget(r.Step, r.Instance, StageReload, r.Attempt, r.Err)
	if in == nil {
		return
	}
	ctx.Emit(Spec, ActReload, withErr([]machine.Field{machine.U("gen", pr.Generation), machine.S("instance", in.ID), machine.I("attempt", int64(r.Attempt)), machine.B("ok", r.Err == nil)}, r.Err)...)
	if r.Err != nil {
		m.failInstance(ctx, pr, in, r.Err.Error())
		return
	}
	in.Reload.State, in.Reload.Err = StepDone, ""
	if m.opts.Mutant == MutantConfirmOnReload {
		in.Stage, in.Observed = StageConfirmed, pr.Generation
		m.cancelTimer(instanceTimer(pr.Generation, in.ID))
		m.maybeDone(ctx, pr)
		return
	}
	in.Stage = StageObserve
	in.Observe.Limit = in.Observe.Attempt + m.opts.MaxAttempts
	m.issueInstance(ctx, pr, in) // its SetTimer replaces the reload deadline
}

func (m *Machine) filesSeen(ctx *machine.Ctx, r FilesSeen) {
	pr, in := m.replyTarget(r.Step, r.Instance, StageVisible, r.Attempt, r.Err)
	if in == nil {
		return
	}
	fs := []machine.Field{machine.U("gen", pr.Generation), machine.S("instance", in.ID), machine.I("attempt", int64(r.Attempt)), machine.B("ok", r.Err == nil)}
	if r.Err != nil {
		ctx.Emit(Spec, ActFilesSeen, withErr(fs, r.Err)...)
		m.failInstance(ctx, pr, in, r.Err.Error())
		return
	}
	ctx.Emit(Spec, ActFilesSeen, append(fs, machine.U("seen", r.Generation))...)
	if r.Generation < pr.Generation && m.opts.Mutant != MutantSeenAny {
		// A success of the read, but the files are not there yet: wait and ask again. A
		// RELOAD now would re-read the old files.
		m.failInstance(ctx, pr, in, fmt.Sprintf("sees generation %d of the files, want %d (not projected into the pod yet)", r.Generation, pr.Generation))
		return
	}
	in.Visible.State, in.Visible.Err = StepDone, ""
	in.Stage = StageReload
	in.Reload.Limit = in.Reload.Attempt + m.opts.MaxAttempts
	m.issueInstance(ctx, pr, in) // its SetTimer replaces the wait's deadline
}

func (m *Machine) observed(ctx *machine.Ctx, r Observed) {
	pr, in := m.replyTarget(r.Step, r.Instance, StageObserve, r.Attempt, r.Err)
	if in == nil {
		return
	}
	fs := []machine.Field{machine.U("gen", pr.Generation), machine.S("instance", in.ID), machine.I("attempt", int64(r.Attempt)), machine.B("ok", r.Err == nil)}
	if r.Err != nil {
		ctx.Emit(Spec, ActObserve, withErr(fs, r.Err)...)
		m.failInstance(ctx, pr, in, r.Err.Error())
		return
	}
	ctx.Emit(Spec, ActObserve, append(fs, machine.U("observed", r.Generation), machine.B("known", r.Known))...)
	in.Observe.State, in.Observe.Err = StepDone, ""
	switch {
	case !r.Known:
		in.Stage = StageUnknown
	case r.Generation == pr.Generation:
		in.Stage, in.Observed = StageConfirmed, r.Generation
	case r.Generation > pr.Generation:
		in.Stage, in.Observed = StageAhead, r.Generation
	case m.opts.Mutant == MutantNoReloadRetry:
		in.Observed = r.Generation
		in.Stage, in.Failed = StageStuck, StageReload
		m.cancelTimer(instanceTimer(pr.Generation, in.ID))
		m.maybeDone(ctx, pr)
		return
	default:
		// The reload did not take (the instance read older files, or restarted from them
		// before they were replaced): it counts as a failed reload, which is retried.
		in.Observed = r.Generation
		in.Stage = StageReload
		in.Reload.State = StepAwaiting
		m.failInstance(ctx, pr, in, fmt.Sprintf("reloaded but reports generation %d, want %d", r.Generation, pr.Generation))
		return
	}
	m.cancelTimer(instanceTimer(pr.Generation, in.ID))
	m.maybeDone(ctx, pr)
}

func (m *Machine) failInstance(ctx *machine.Ctx, pr *Progress, in *Instance, err string) {
	st := in.step()
	st.Err = err
	if st.Attempt >= st.Limit {
		ctx.Emit(Spec, ActGiveUp, machine.U("gen", pr.Generation), machine.S("step", in.stepID(pr.Generation)), machine.I("attempts", int64(st.Attempt)))
		st.State = StepDone
		in.Stage, in.Failed = StageStuck, in.Stage
		m.cancelTimer(instanceTimer(pr.Generation, in.ID))
		m.maybeDone(ctx, pr)
		return
	}
	m.backoff(ctx, st, instanceTimer(pr.Generation, in.ID))
}

// --- Timers, backoff, restart -------------------------------------------------------------

// backoff schedules the next attempt of st: Backoff·2^(attempt-1), capped at MaxBackoff,
// jittered over [d/2, d] from ctx.Rand.
func (m *Machine) backoff(ctx *machine.Ctx, st *Step, timer string) {
	d, most := max(ms(m.opts.Backoff), 1), max(ms(m.opts.MaxBackoff), 1)
	for i := 1; i < st.Attempt && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	wait := d
	if ctx.Rand != nil && d > 1 {
		wait = d - d/2 + ctx.Rand.Int64N(d/2+1)
	}
	st.State = StepBackoff
	st.At = ctx.Now + wait
	m.setTimer(timer, st.At)
}

func (m *Machine) timer(ctx *machine.Ctx, id string) {
	if s := m.s.Stray; s != nil && id == s.Step {
		ctx.Emit(Spec, ActTimeout, machine.U("gen", s.Generation), machine.S("step", s.Step), machine.I("attempt", int64(s.Attempt)))
		m.endStray(ctx)
		return
	}
	pr := m.s.Push
	if pr == nil || pr.Done {
		return
	}
	if id == filesStep(pr.Generation) {
		m.stepTimer(ctx, &pr.FilesStep, id, func() { m.issueFiles(ctx, pr) }, func(err string) { m.failFiles(ctx, pr, err) })
		return
	}
	prefix := instanceTimer(pr.Generation, "")
	if !strings.HasPrefix(id, prefix) {
		return
	}
	i, ok := pr.find(id[len(prefix):])
	if !ok {
		return
	}
	in := &pr.Instances[i]
	if in.Stage != StageVisible && in.Stage != StageReload && in.Stage != StageObserve {
		return
	}
	m.stepTimer(ctx, in.step(), in.stepID(pr.Generation), func() { m.issueInstance(ctx, pr, in) }, func(err string) { m.failInstance(ctx, pr, in, err) })
}

// stepTimer handles a step's timer: a deadline passing fails the attempt; a backoff ending
// issues the next one.
func (m *Machine) stepTimer(ctx *machine.Ctx, st *Step, step string, retry func(), fail func(string)) {
	gen := machine.U("gen", m.s.Push.Generation)
	switch st.State {
	case StepAwaiting:
		if ctx.Now < st.At {
			return // a timer set for an earlier deadline of this step
		}
		ctx.Emit(Spec, ActTimeout, gen, machine.S("step", step), machine.I("attempt", int64(st.Attempt)))
		fail(fmt.Sprintf("no reply within %s", m.opts.StepTimeout))
	case StepBackoff:
		if ctx.Now < st.At {
			return
		}
		ctx.Emit(Spec, ActRetry, gen, machine.S("step", step), machine.I("attempt", int64(st.Attempt+1)))
		retry()
	}
}

// restarted issues again every command whose reply a dead driver took with it, each with a
// fresh deadline since it is sent again, and sets every backoff timer again. The stray
// write of a superseded push is not sent again; its deadline stands.
func (m *Machine) restarted(ctx *machine.Ctx) {
	n := 0
	if s := m.s.Stray; s != nil {
		m.setTimer(s.Step, s.At) // the stray is not re-issued: it belongs to an older push
	}
	pr := m.s.Push
	if pr == nil || pr.Done {
		gen := uint64(0)
		if pr != nil {
			// The Outcome may have died with the driver before anyone saw it: report the
			// last push's ending again (reporting is idempotent).
			gen = pr.Generation
			m.emit(pr.outcome())
		}
		ctx.Emit(Spec, ActRestart, machine.U("gen", gen), machine.I("reissued", 0))
		return
	}
	switch pr.FilesStep.State {
	case StepAwaiting:
		m.emit(WriteFiles{Step: filesStep(pr.Generation), Attempt: pr.FilesStep.Attempt, Generation: pr.Generation, Files: pr.Files})
		n++
		pr.FilesStep.At = ctx.Now + ms(m.opts.StepTimeout) // sent again, so waited for again
		m.setTimer(filesStep(pr.Generation), pr.FilesStep.At)
	case StepBackoff:
		m.setTimer(filesStep(pr.Generation), pr.FilesStep.At)
	}
	for i := range pr.Instances {
		in := &pr.Instances[i]
		if in.Stage != StageVisible && in.Stage != StageReload && in.Stage != StageObserve {
			continue
		}
		st := in.step()
		if st.State == StepAwaiting {
			m.emitInstanceCommand(pr, in)
			n++
			st.At = ctx.Now + ms(m.opts.StepTimeout)
		}
		m.setTimer(instanceTimer(pr.Generation, in.ID), st.At)
	}
	ctx.Emit(Spec, ActRestart, machine.U("gen", pr.Generation), machine.I("reissued", int64(n)))
}

// --- Ending -------------------------------------------------------------------------------

func (m *Machine) maybeDone(ctx *machine.Ctx, pr *Progress) {
	if pr.Done || pr.FilesStep.State != StepDone {
		return
	}
	for _, in := range pr.Instances {
		if !in.Stage.Terminal() {
			return
		}
	}
	m.finish(ctx, pr)
}

func (m *Machine) finish(ctx *machine.Ctx, pr *Progress) {
	pr.Done = true
	o := pr.outcome()
	ctx.Emit(Spec, ActDone, machine.U("gen", pr.Generation), machine.I("confirmed", int64(len(o.Confirmed))), machine.I("ahead", int64(len(o.Ahead))),
		machine.I("unknown", int64(len(o.Unknown))), machine.I("stuck", int64(len(o.Stuck))), machine.B("files_ok", pr.FilesErr == ""))
	m.emit(o)
}

func (pr *Progress) outcome() Outcome {
	o := Outcome{Generation: pr.Generation, FilesErr: pr.FilesErr}
	for _, in := range pr.Instances {
		switch in.Stage {
		case StageConfirmed:
			o.Confirmed = append(o.Confirmed, in.ID)
		case StageAhead:
			o.Ahead = append(o.Ahead, in.ID)
		case StageUnknown:
			o.Unknown = append(o.Unknown, in.ID)
		case StageStuck:
			o.Stuck = append(o.Stuck, in.ID)
		}
	}
	return o
}

func withErr(fs []machine.Field, err error) []machine.Field {
	if err != nil {
		fs = append(fs, machine.S("err", err.Error()))
	}
	return fs
}
