package check

import (
	"fmt"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// InvDesignatedWritable is the cutover's promise about its designated instance d, which
// ReleasedWritable leaves out (d's CUTOVER clears its holds, and until the publish it
// routes to a layout the fence closes): once the machine has put d back on the layout the
// database serves — the rollback's reload before it resumes d, the check after the resume
// that reloads a d which restarted after its CUTOVER — d routes to that layout's writable
// shards. Both tiers hold it: machine/cutover's world ("serving ended with the designated
// instance ...") and the simulator's cutover-windows scenario.
const InvDesignatedWritable = "designated-writable"

// RefusedAfter checks InvDesignatedWritable from step since on: no transaction through r
// is refused by a fence that was on when each of its sends to that backend went out, at or
// after since. The caller excuses what the machine cannot know (a CUTOVER landing after it
// gave up on it, a restart since) by not calling it.
func RefusedAfter(h *History, r *model.Router, backends []*model.Backend, role string, since int) *detsim.Violation {
	byName := map[string]*model.Backend{}
	for _, b := range backends {
		byName[b.Name] = b
	}
	for _, o := range h.Ops {
		if o.Via != r.ID || (o.Code != model.CodeLoginRefused && o.Code != model.CodeTerminated) {
			continue
		}
		if at, ok := fencedWhenSent(o, r.Dispatched, byName[o.Backend], role, since); ok {
			return &detsim.Violation{Invariant: InvDesignatedWritable, T: o.Complete,
				Detail: fmt.Sprintf("%s: %s sent it (step %d, after it was released at step %d) to %s, fenced since before then", o, r.ID, at.Step, since, o.Backend)}
		}
	}
	return nil
}
