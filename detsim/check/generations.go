package check

import (
	"fmt"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// Generations checks that generations only move forward and that files are only ever
// written for a published generation:
//
//   - generations-increase: the record's generation never goes down from one write to the
//     next, nor the files', nor what any instance loads (restarts included).
//   - files-only-published: when files for generation g are written, the record already
//     publishes g or later (an instance that restarts routes by what it reads, so files
//     for an unpublished generation route it before the cutover fenced the source).
func Generations(st *model.Store, files *model.Files, routers []*model.Router) *detsim.Violation {
	var g uint64
	for _, w := range st.Writes {
		if w.Generation < g {
			return &detsim.Violation{Invariant: "generations-increase", T: w.T,
				Detail: fmt.Sprintf("record %s went from generation %d to %d at version %d", w.DB, g, w.Generation, w.Version)}
		}
		g = w.Generation
	}
	g = 0
	for _, w := range files.Writes {
		if w.Generation < g {
			return &detsim.Violation{Invariant: "generations-increase", T: w.T,
				Detail: fmt.Sprintf("files went from generation %d to %d", g, w.Generation)}
		}
		g = w.Generation
		published := uint64(0)
		for _, rw := range st.Writes {
			if rw.Seq <= w.Step {
				published = max(published, rw.Generation)
			}
		}
		if w.Generation > published {
			return &detsim.Violation{Invariant: "files-only-published", T: w.T,
				Detail: fmt.Sprintf("files for generation %d written while the record published %d", w.Generation, published)}
		}
	}
	for _, r := range routers {
		g = 0
		for _, l := range r.Loads {
			if l.Generation < g {
				return &detsim.Violation{Invariant: "generations-increase", T: l.T,
					Detail: fmt.Sprintf("%s loaded generation %d after %d (%s)", r.ID, l.Generation, g, l.Why)}
			}
			g = l.Generation
		}
	}
	return nil
}

// Converged checks liveness once faults healed and a quiet period passed: every instance
// runs and has loaded gen, and routes db to hosts.
func Converged(routers []*model.Router, db string, gen uint64, hosts []string, now int64) *detsim.Violation {
	for _, r := range routers {
		switch {
		case !r.Up():
			return &detsim.Violation{Invariant: "converges", T: now, Detail: fmt.Sprintf("%s is still down after the quiet period", r.ID)}
		case r.Generation() != gen:
			return &detsim.Violation{Invariant: "converges", T: now,
				Detail: fmt.Sprintf("%s has generation %d loaded, the record publishes %d", r.ID, r.Generation(), gen)}
		case fmt.Sprint(r.Routes(db)) != fmt.Sprint(hosts):
			return &detsim.Violation{Invariant: "converges", T: now,
				Detail: fmt.Sprintf("%s routes %s to %v, the record to %v", r.ID, db, r.Routes(db), hosts)}
		}
	}
	return nil
}
