package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// txnName strips a branch gid's _<position> suffix.
func txnName(gid string) string {
	if i := strings.LastIndexByte(gid, '_'); i > 0 {
		return gid[:i]
	}
	return gid
}

// Atomic checks what §10 promises for 2PC transfers:
//
//   - 2pc-atomic: no transaction has a branch committed and another rolled back, and no
//     branch was resolved against its coordinator's decision.
//   - indoubt-never-resolves: no prepared transaction was committed or rolled back by the
//     in-doubt monitor (by == monitor).
//   - conservation: the balances that are committed, plus the branches still prepared of
//     transactions committed elsewhere, add up to total: money is neither made nor lost.
//
// A branch still prepared is in doubt, not a violation: it is "may have applied".
func Atomic(backends []*model.Backend, coords []*model.Coordinator, monitor string, total int64) *detsim.Violation {
	type fate struct{ commit, rollback []string }
	fates := map[string]*fate{}
	for _, b := range backends {
		for _, r := range b.Resolutions {
			if r.By == monitor {
				return &detsim.Violation{Invariant: "indoubt-never-resolves", T: r.T,
					Detail: fmt.Sprintf("%s resolved %s on %s (commit=%v): only an operator may", monitor, r.GID, r.Backend, r.Commit)}
			}
			n := txnName(r.GID)
			f := fates[n]
			if f == nil {
				f = &fate{}
				fates[n] = f
			}
			if r.Commit {
				f.commit = append(f.commit, r.Backend+" by "+r.By)
			} else {
				f.rollback = append(f.rollback, r.Backend+" by "+r.By)
			}
		}
	}
	decided := map[string]bool{}
	for _, c := range coords {
		for _, d := range c.Decisions {
			if prev, ok := decided[d.GID]; ok && prev != d.Commit {
				return &detsim.Violation{Invariant: "2pc-atomic", T: d.T,
					Detail: fmt.Sprintf("coordinator decided %s both ways", d.GID)}
			}
			decided[d.GID] = d.Commit
		}
	}
	for _, n := range slices.Sorted(maps.Keys(fates)) {
		f := fates[n]
		if len(f.commit) > 0 && len(f.rollback) > 0 {
			return &detsim.Violation{Invariant: "2pc-atomic",
				Detail: fmt.Sprintf("%s committed on %v but rolled back on %v", n, f.commit, f.rollback)}
		}
		if d, ok := decided[n]; ok && ((d && len(f.rollback) > 0) || (!d && len(f.commit) > 0)) {
			return &detsim.Violation{Invariant: "2pc-atomic",
				Detail: fmt.Sprintf("%s: the coordinator decided commit=%v but branches were committed on %v and rolled back on %v", n, d, f.commit, f.rollback)}
		}
	}
	var sum int64
	for _, b := range backends {
		for _, v := range b.Rows() {
			if len(v) > 0 {
				sum += v[0]
			}
		}
		for _, p := range b.PreparedTxns() {
			if f := fates[txnName(p.GID)]; f != nil && len(f.commit) > 0 {
				for _, op := range p.Txn.Ops {
					sum += op.Value
				}
			}
		}
	}
	if sum != total {
		return &detsim.Violation{Invariant: "conservation",
			Detail: fmt.Sprintf("balances add up to %d, not %d (counting branches still prepared of transactions committed elsewhere)", sum, total)}
	}
	return nil
}
