package check

import (
	"fmt"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// ReleasedWritable checks the availability half of the cutover's promise: an instance the
// cutover holds sends nothing, and once it releases it, it routes to a writable layout, so
// the instance never sends a transaction to a shard that is already fenced. A transaction
// refused by the fence (SQLSTATE 28000 at login, or 57P01 on a pooled session the fence had
// ended) by a backend that was already fenced when the instance sent it is a violation. Excluded: instances the cutover reported as missed (never paused),
// lagging (never reloaded) or unresumed, instances that restarted (a restart loses the
// hold), and whatever excluded names; for them the fence refusing is the design working.
// A transaction sent before the fence and refused when it arrived, or ended with its session
// by the fence, is always allowed: that is the fence doing its work. A transaction the
// network delivered to the instance twice was sent twice; the refusal is a violation only
// if every send of it to the refusing backend went out once that backend was fenced.
func ReleasedWritable(h *History, routers []*model.Router, backends []*model.Backend, role string, excluded map[string]bool) *detsim.Violation {
	sent := map[string]map[int64][]model.Dispatch{}
	for _, r := range routers {
		sent[r.ID] = r.Dispatched
	}
	byName := map[string]*model.Backend{}
	for _, b := range backends {
		byName[b.Name] = b
	}
	for _, o := range h.Ops {
		if (o.Code != model.CodeLoginRefused && o.Code != model.CodeTerminated) || excluded[o.Via] {
			continue
		}
		if at, ok := fencedWhenSent(o, sent[o.Via], byName[o.Backend], role, 0); ok {
			return &detsim.Violation{Invariant: "released-writable", T: o.Complete,
				Detail: fmt.Sprintf("%s: %s sent it (step %d) to %s, fenced since before then; the instance was neither missed nor lagging nor restarted", o, o.Via, at.Step, o.Backend)}
		}
	}
	return nil
}

// fencedWhenSent reports whether every send of o to the backend that refused it went out
// at or after step since with that backend already fenced, and the last such send.
func fencedWhenSent(o *Op, sent map[int64][]model.Dispatch, b *model.Backend, role string, since int) (model.Dispatch, bool) {
	if b == nil {
		return model.Dispatch{}, false
	}
	var at model.Dispatch
	fencedEach := false
	for _, d := range sent[o.ID] {
		if d.Backend != o.Backend {
			continue
		}
		if d.Step < since || !b.FencedAt(role, d.Step) {
			return model.Dispatch{}, false
		}
		at, fencedEach = d, true
	}
	return at, fencedEach
}
