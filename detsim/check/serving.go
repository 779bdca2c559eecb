package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// OneSideServes checks "no write is accepted by a source shard after the destination began
// serving", in both directions (a reverse makes the old shards serve again): side maps each
// backend to the layout it belongs to. A client write accepted on side A at time t after a
// write on side B at t' < t is a violation unless role was fenced on a side-B backend at a
// time in [t', t]: the only legitimate way back is to fence what served last.
func OneSideServes(backends []*model.Backend, side map[string]int, role string) *detsim.Violation {
	var accepts []model.Accept
	var fences []model.Fence
	for _, b := range backends {
		for _, a := range b.Accepted {
			if a.Writes {
				accepts = append(accepts, a)
			}
		}
		for _, f := range b.Fences {
			if f.On && f.Role == role {
				fences = append(fences, f)
			}
		}
	}
	slices.SortStableFunc(accepts, func(a, b model.Accept) int { return cmp.Compare(a.Step, b.Step) })
	last := map[int]model.Accept{} // the latest write seen on each side
	for _, a := range accepts {
		s := side[a.Backend]
		for _, other := range slices.Sorted(maps.Keys(last)) {
			w := last[other]
			if other == s || w.Step >= a.Step {
				continue
			}
			fenced := slices.ContainsFunc(fences, func(f model.Fence) bool {
				return side[f.Backend] == other && f.Step >= w.Step && f.Step <= a.Step
			})
			if !fenced {
				return &detsim.Violation{Invariant: "one-side-serves", T: a.T,
					Detail: fmt.Sprintf("%s accepted a write (txn %d via %s) at t=%d after %s (the other layout) accepted txn %d via %s at t=%d, with no fence of that layout in between",
						a.Backend, a.TxnID, a.Via, a.T, w.Backend, w.TxnID, w.Via, w.T)}
			}
		}
		last[s] = a
	}
	return nil
}
