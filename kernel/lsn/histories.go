package lsn

import (
	"fmt"
	"slices"
)

// Histories is the monitor's record: one History per physical endpoint, shared by every
// hostgroup the endpoint belongs to. Memberships are not stored here, so retention grows with
// endpoints, never with endpoint×hostgroup pairs.
type Histories struct {
	window int64
	m      map[Endpoint]*History
	mutant mutant
}

// NewHistories returns an empty record whose histories use the given window in milliseconds
// (0 or less means DefaultWindow).
func NewHistories(window int64) *Histories {
	if window <= 0 {
		window = DefaultWindow
	}
	return &Histories{window: window, m: map[Endpoint]*History{}}
}

// Window returns the history window in milliseconds.
func (hs *Histories) Window() int64 { return hs.window }

// Record adds a sample of ep, creating its history on first sight.
func (hs *Histories) Record(ep Endpoint, s Sample) error {
	h := hs.m[ep]
	if h == nil {
		h = NewHistory(hs.window)
		h.mutant = hs.mutant
		hs.m[ep] = h
	}
	if err := h.Record(s); err != nil {
		return fmt.Errorf("endpoint %s: %w", ep, err)
	}
	return nil
}

// Get returns ep's history, or nil if it was never sampled. The caller must not modify it.
func (hs *Histories) Get(ep Endpoint) *History { return hs.m[ep] }

// After is History.After for ep; false when ep was never sampled.
func (hs *Histories) After(ep Endpoint, t int64) (Sample, bool) {
	if h := hs.m[ep]; h != nil {
		return h.After(t)
	}
	return Sample{}, false
}

// Reached is History.Reached for ep; false when ep was never sampled.
func (hs *Histories) Reached(ep Endpoint, target LSN) bool {
	h := hs.m[ep]
	return h != nil && h.Reached(target)
}

// Forget drops ep's history (the endpoint left the configuration).
func (hs *Histories) Forget(ep Endpoint) { delete(hs.m, ep) }

// Len is the number of endpoints with a history.
func (hs *Histories) Len() int { return len(hs.m) }

// Row is one line of the stats view (stats_pgsql_lsn): an endpoint and its latest position,
// or no position (SQL NULL) when its progress is unknown or withdrawn.
type Row struct {
	Endpoint Endpoint
	LSN      LSN
	Known    bool
}

// String renders the row as host, port and position or NULL, tab-separated.
func (r Row) String() string {
	v := "NULL"
	if r.Known {
		v = r.LSN.String()
	}
	return fmt.Sprintf("%s\t%d\t%s", r.Endpoint.Host, r.Endpoint.Port, v)
}

// Rows returns one row per endpoint, ordered by host then port.
func (hs *Histories) Rows() []Row {
	out := make([]Row, 0, len(hs.m))
	for ep, h := range hs.m {
		s, _ := h.Latest()
		out = append(out, Row{Endpoint: ep, LSN: s.LSN, Known: s.Known})
	}
	slices.SortFunc(out, func(a, b Row) int { return a.Endpoint.Compare(b.Endpoint) })
	return out
}

// Clone returns an independent deep copy.
func (hs *Histories) Clone() *Histories {
	c := &Histories{window: hs.window, m: make(map[Endpoint]*History, len(hs.m)), mutant: hs.mutant}
	for ep, h := range hs.m {
		c.m[ep] = h.Clone()
	}
	return c
}
