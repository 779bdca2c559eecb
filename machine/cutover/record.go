package cutover

import (
	"bytes"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// The cutover writes the record four times at most, each a compare-and-set on the version
// it last saw:
//
//	begin    g    resharding → cutting_over (to g+1, step copy): no other controller may
//	              start a cutover or push a different target now.
//	publish  g+1  layout = target, target = the old layout with its shards marked fenced,
//	              cutting_over (to g+2, step resume): g+2 is what comes next, finalize or
//	              reverse.
//	finish   g+2  the new layout, serving, no target (finalize).
//	reverse  g+2  the old layout, serving, no target.
//	abandon  g+1  the old layout, serving, no target: a rollback before the point of no
//	              return (g+1 was never stored, so it is not reused).
//
// Dropping the target is a new generation because it changes the routers' files (the
// reshard destination goes away): shardmap.ValidateNext refuses it otherwise. The cutover
// does not push finish's or abandon's generation itself, since routing does not change:
// Done names it, and ConfigPush carries it to the instances.

func beginRecord(cur *shardmap.Record) *shardmap.Record {
	c := cur.Clone()
	c.State = shardmap.State{Phase: shardmap.CuttingOver, To: cur.State.To, Step: shardmap.StepCopy}
	return c
}

func (m *Machine) publishRecord(cur *shardmap.Record) *shardmap.Record {
	c := cur.Clone()
	if c.Target == nil {
		return c // not rebasable; onRecord never gets here with a nil target
	}
	old := c.Layout
	c.Layout = *c.Target
	c.Generation = cur.State.To
	if m.s.Reverse {
		if m.s.Plan.Options.Mutants.ReverseReusesGeneration {
			c.Generation = m.s.Origin.Generation
		}
		for i := range c.Layout.Shards {
			c.Layout.Shards[i].Fence = shardmap.FenceOpen
		}
		c.Target = nil
		c.State = shardmap.State{Phase: shardmap.Serving}
		return c
	}
	for i := range old.Shards {
		old.Shards[i].Fence = shardmap.FenceWrites
	}
	c.Target = &old
	c.State = shardmap.State{Phase: shardmap.CuttingOver, To: c.Generation + 1, Step: shardmap.StepResume}
	return c
}

func serveRecord(cur *shardmap.Record) *shardmap.Record {
	c := cur.Clone()
	c.Generation = cur.State.To
	c.Target = nil
	c.State = shardmap.State{Phase: shardmap.Serving}
	return c
}

// transform is the change the current stage makes to a record.
func (m *Machine) transform(cur *shardmap.Record) *shardmap.Record {
	switch m.s.Stage {
	case stBegin:
		return beginRecord(cur)
	case stPublish:
		return m.publishRecord(cur)
	}
	return serveRecord(cur)
}

// writeRecord sends the stage's compare-and-set. Its step id carries the version it
// expects ("@<version>"): a rebased write is a different request, so a late answer to the
// one it replaced cannot be taken for its own.
func (m *Machine) writeRecord(ctx *machine.Ctx, next *shardmap.Record) {
	m.s.Next = next
	m.add(ctx, op{Step: m.recordStep(), Kind: kRecord})
}

func (m *Machine) recordStep() string { return m.stepID("") + "@" + u(m.s.Rec.Version) }

// sameContent reports whether two records are equal but for Version: a retried CAS whose
// first try landed finds its own record in the store.
func sameContent(a, b *shardmap.Record) bool {
	if a == nil || b == nil {
		return false
	}
	x, y := *a, *b
	x.Version, y.Version = 0, 0
	ex, err1 := x.MarshalBinary()
	ey, err2 := y.MarshalBinary()
	return err1 == nil && err2 == nil && bytes.Equal(ex, ey)
}

// rebasable reports whether the record that won the CAS is still the one the machine is
// changing: same database, same generation, same phase. Someone rewrote it (an
// annotation, a fence mark) without touching what the cutover decides on, so the change
// is made again on top of it.
func rebasable(cur, last *shardmap.Record) bool {
	return cur.Router == last.Router && cur.Generation == last.Generation && cur.State == last.State &&
		(cur.Target == nil) == (last.Target == nil)
}

// maxRebases bounds how often one write is made again on top of someone else's harmless
// rewrite; past it the record is not settling and the write counts as a conflict.
const maxRebases = 8

func (m *Machine) onRecord(ctx *machine.Ctx, in RecordWritten) {
	i := m.find(in.Step)
	if i < 0 || m.s.Ops[i].Kind != kRecord {
		return
	}
	o := &m.s.Ops[i]
	switch {
	case in.Err == nil && in.Conflict == nil:
		rec := m.s.Next.Clone()
		rec.Version = in.Version
		m.s.Rec = rec
		m.succeed(ctx, i, machine.U("version", in.Version))
	case in.Conflict != nil && sameContent(in.Conflict, m.s.Next):
		m.s.Rec = in.Conflict.Clone()
		m.succeed(ctx, i, machine.U("version", in.Conflict.Version), machine.B("retry", true))
	case in.Conflict != nil && rebasable(in.Conflict, m.s.Rec) && o.Rebases < maxRebases:
		o.Rebases++
		ctx.Emit(Spec, "Rebase", machine.U("gen", m.s.Next.Generation), machine.U("version", in.Conflict.Version))
		m.s.Rec = in.Conflict.Clone()
		m.s.Next = m.transform(m.s.Rec)
		o.Step = m.recordStep()
		m.issue(ctx, i)
	case in.Conflict != nil:
		c := in.Conflict
		o.Err = "record changed under the cutover: version " + u(c.Version) + ", generation " + u(c.Generation) + ", phase " + c.State.Phase.String()
		m.emitOp(ctx, o, false)
		switch m.s.Stage {
		case stBegin:
			m.finish(ctx, Aborted, o.Err+"; nothing was changed, start again from the current record")
		case stFinish, stUndoRecord:
			// Every instance and shard is already where it should be; only the record's
			// phase is left behind.
			m.alert(o.Step, o.Err+"; set the record to serving by hand")
			out := Finalized
			if m.s.Stage == stUndoRecord {
				out = RolledBack
			}
			m.finish(ctx, out, m.s.Reason)
		default:
			m.finish(ctx, Halted, o.Err+" while publishing generation "+u(m.s.Next.Generation)+
				"; the designated instance already routes by it, every other instance is paused and the shards of both layouts are fenced: reconcile the record, unfence the layout it serves, then RELOAD and RESUME")
		}
	default:
		m.fail(ctx, i, in.Err.Error())
	}
}
