package check

import (
	"fmt"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// ReleasedWritable checks the availability half of the cutover's promise: an instance the
// cutover holds sends nothing, and once it releases it, it routes to a writable layout, so
// the instance never sends a transaction to a shard that is already fenced. A transaction
// refused at login (SQLSTATE 28000) by a backend that was fenced when the instance sent it
// is a violation. Excluded: instances the cutover reported as missed (never paused),
// lagging (never reloaded) or unresumed, instances that restarted (a restart loses the
// hold), and whatever excluded names; for them the fence refusing is the design working.
// A transaction sent before the fence and refused when it arrived is always allowed, as is
// a session the fence ended (57P01).
func ReleasedWritable(h *History, routers []*model.Router, backends []*model.Backend, excluded map[string]bool) *detsim.Violation {
	sent := map[string]map[int64]int64{}
	for _, r := range routers {
		sent[r.ID] = r.Dispatched
	}
	fences := map[string][]model.Fence{}
	for _, b := range backends {
		fences[b.Name] = b.Fences
	}
	fencedAt := func(backend string, t int64) bool {
		on := false
		for _, f := range fences[backend] {
			if f.T <= t {
				on = f.On
			}
		}
		return on
	}
	for _, o := range h.Ops {
		if o.Code != model.CodeLoginRefused || excluded[o.Via] {
			continue
		}
		at, ok := sent[o.Via][o.ID]
		if !ok || !fencedAt(o.Backend, at) {
			continue
		}
		return &detsim.Violation{Invariant: "released-writable", T: o.Complete,
			Detail: fmt.Sprintf("%s: %s sent it at t=%d to %s, fenced since before then; the instance was neither missed nor lagging nor restarted", o, o.Via, at, o.Backend)}
	}
	return nil
}
