package check

import (
	"fmt"
	"maps"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// AlertBounds are the monitor's timings the alert check allows for.
type AlertBounds struct {
	Threshold, Period, CallTimeout int64
	// StuckAfter is the monitor's bound for a branch whose coordinator runs and started
	// before it: a prepare that landed after its coordinator crashed.
	StuckAfter int64
	// Healed is when the faults stopped (a monitor cut off from a shard cannot alert).
	Healed int64
	// End is the end of the run.
	End int64
}

// InDoubtAlerts checks "the in-doubt monitor alerts within threshold": every branch still
// prepared at the end whose coordinator process died after starting it (crashed: gone, or
// restarted without finishing it) is in an alert that is raised and not cleared, first
// raised no later than max(prepared + Threshold, the crash, the heal) + 2 Periods + 4 call
// timeouts (a round's scans and the delivery). A branch prepared after the crash (the dead
// process's request still travelling) may find a restarted process that started before
// it, which the monitor cannot tell from one finishing it: StuckAfter replaces Threshold. alerted maps a branch gid to when an active
// alert naming it was first raised. Branches whose deadline is after the end of the run are
// not judged.
func InDoubtAlerts(backends []*model.Backend, routers []*model.Router, alerted map[string]int64, b AlertBounds) *detsim.Violation {
	type origin struct {
		r     *model.Router
		begin model.Begin
	}
	origins := map[string]origin{}
	for _, r := range routers {
		for _, bg := range r.Coordinator().Begun {
			origins[bg.GID] = origin{r, bg}
		}
	}
	for _, be := range backends {
		pts := be.PreparedTxns()
		for _, gid := range slices.Sorted(maps.Keys(pts)) {
			p := pts[gid]
			o, ok := origins[txnName(gid)]
			if !ok {
				continue // not a coordinator's (none in these scenarios)
			}
			died := int64(-1)
			for _, t := range o.r.Crashes {
				if t >= o.begin.T {
					died = t
					break
				}
			}
			if died < 0 {
				continue // its coordinator still runs and retries: not the monitor's to alert
			}
			wait := b.Threshold
			if p.At > died {
				wait = max(b.Threshold, b.StuckAfter)
			}
			deadline := max(p.At+wait, died, b.Healed) + 2*b.Period + 4*b.CallTimeout
			if deadline > b.End {
				continue
			}
			at, ok := alerted[gid]
			switch {
			case !ok:
				return &detsim.Violation{Invariant: "indoubt-alerts", T: b.End,
					Detail: fmt.Sprintf("%s on %s is in doubt since t=%d (its coordinator %s died at t=%d) but no active alert names it by t=%d",
						gid, be.Name, p.At, o.r.ID, died, b.End)}
			case at > deadline:
				return &detsim.Violation{Invariant: "indoubt-alerts", T: at,
					Detail: fmt.Sprintf("%s on %s (prepared t=%d, coordinator %s died t=%d) was first alerted at t=%d, after the bound t=%d",
						gid, be.Name, p.At, o.r.ID, died, at, deadline)}
			}
		}
	}
	return nil
}
