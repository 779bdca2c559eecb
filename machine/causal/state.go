package causal

import (
	"maps"

	"loam.dev/router/kernel/lsn"
)

// Rows is the stats view (stats_pgsql_lsn): one row per physical endpoint with its latest
// position, or none when its progress is unknown or withdrawn.
func (m *Machine) Rows() []lsn.Row { return m.hist.Rows() }

// History returns ep's retained history, or nil. The caller must not modify it.
func (m *Machine) History(ep lsn.Endpoint) *lsn.History { return m.hist.Get(ep) }

// Footprint is the bytes held by LSN retention across all endpoints.
func (m *Machine) Footprint() int {
	n := 0
	m.eachHistory(func(h *lsn.History) { n += h.Footprint() })
	return n
}

// eachHistory calls f for every history the machine holds.
func (m *Machine) eachHistory(f func(*lsn.History)) {
	for _, r := range m.hist.Rows() {
		f(m.hist.Get(r.Endpoint))
	}
	for _, h := range m.copies {
		f(h)
	}
}

// Waiting is the number of causal requests waiting for progress.
func (m *Machine) Waiting() int { return len(m.waiting) }

// RejectedSamples counts samples dropped because they were not sent after the endpoint's
// latest sample (a second poller or a clock that went back).
func (m *Machine) RejectedSamples() int { return m.rejected }

// Snapshot is a frozen copy of a machine's state.
type Snapshot struct{ m *Machine }

// Snapshot returns a copy of the state that later inputs do not change; Restore turns it back
// into a machine. The simulator uses it to fork a run at a point.
func (m *Machine) Snapshot() Snapshot { return Snapshot{m.clone()} }

// Restore returns a machine in the snapshot's state; the snapshot stays reusable.
func Restore(s Snapshot) *Machine { return s.m.clone() }

func (m *Machine) clone() *Machine {
	c := &Machine{
		hist:     m.hist.Clone(),
		groups:   map[int][]lsn.Endpoint{},
		fronts:   map[string]map[int]record{},
		rejected: m.rejected,
		mutant:   m.mutant,
	}
	for hg, eps := range m.groups {
		c.groups[hg] = append([]lsn.Endpoint(nil), eps...)
	}
	for f, recs := range m.fronts {
		c.fronts[f] = maps.Clone(recs)
	}
	for _, r := range m.waiting {
		cp := *r
		c.waiting = append(c.waiting, &cp)
	}
	if m.copies != nil {
		c.copies = map[copyKey]*lsn.History{}
		for k, h := range m.copies {
			c.copies[k] = h.Clone()
		}
	}
	return c
}
