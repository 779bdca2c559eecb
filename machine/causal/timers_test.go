package causal_test

import (
	"cmp"
	"slices"

	"loam.dev/router/machine/causal"
)

// timers plays a driver's timer wheel in tests: it arms and disarms timers as the machine
// asks, and hands back those that are due.
type timers map[string]int64

func (ts timers) apply(cmds []causal.Command) {
	for _, c := range cmds {
		switch c := c.(type) {
		case causal.SetTimer:
			ts[c.ID] = c.At
		case causal.CancelTimer:
			delete(ts, c.ID)
		}
	}
}

// due removes and returns the timers whose deadline is at or before now, earliest first.
func (ts timers) due(now int64) []string {
	var out []string
	for id, at := range ts {
		if at <= now {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(ts[a], ts[b]), cmp.Compare(a, b)) })
	for _, id := range out {
		delete(ts, id)
	}
	return out
}
