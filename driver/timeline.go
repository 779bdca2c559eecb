package driver

import (
	"slices"
	"sync"
	"time"
)

// Timeline records where a run's wall time goes, so that a slow step can be told from a
// slow command and the driver's own cost from that of the systems it drives: each step's
// feeding of inputs to the machine and its snapshot save, each command from Execute called
// to Execute returned and from then until its reply is fed, each timer from set to fired,
// and, in an Audited executor given the same Timeline, each audit write. Give it to
// Config.Timeline; CutoverPause reads a cutover's write pause out of it. It is safe for
// concurrent use and keeps at most MaxSpans spans (the oldest are dropped).
type Timeline struct {
	mu    sync.Mutex
	spans []Span
	// MaxSpans bounds the spans kept; 0 is DefaultMaxSpans.
	MaxSpans int
}

// DefaultMaxSpans is Timeline.MaxSpans's default: a cutover's catch-up polls are a few
// spans a second, so this holds hours of them and the whole pause.
const DefaultMaxSpans = 100_000

// SpanKind says what a Span measured.
type SpanKind uint8

const (
	// SpanStep is the machine's On over one step's inputs.
	SpanStep SpanKind = iota + 1
	// SpanSave is the snapshot save before a step's commands execute.
	SpanSave
	// SpanExec is one command, from Execute called to Execute returned.
	SpanExec
	// SpanFeed is one reply, from Execute returned to the step that feeds it starting:
	// the driver's scheduling (and the steps ahead of it).
	SpanFeed
	// SpanTimer is one timer from set to fired (a retry's wait, a poll interval).
	SpanTimer
	// SpanAudit is one audit write of an Audited executor (inside its command's SpanExec).
	SpanAudit
)

var spanKindNames = [...]string{SpanStep: "step", SpanSave: "save", SpanExec: "exec", SpanFeed: "feed", SpanTimer: "timer", SpanAudit: "audit"}

func (k SpanKind) String() string {
	if int(k) < len(spanKindNames) && spanKindNames[k] != "" {
		return spanKindNames[k]
	}
	return "SpanKind(?)"
}

// MarshalText names the kind in JSON.
func (k SpanKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Span is one measured stretch of a run.
type Span struct {
	Kind SpanKind `json:"kind"`
	// Step is the command's step id (for SpanExec, SpanFeed, SpanAudit) or the timer's id.
	Step   string `json:"step,omitempty"`
	What   string `json:"what,omitempty"`   // the command, as it prints
	Target string `json:"target,omitempty"` // what it acts on: an instance, a shard, "store"
	Result string `json:"result,omitempty"` // "ok" or the reply's error (SpanExec)
	// N is how many inputs a SpanStep fed, or how many commands a SpanSave preceded.
	N     int       `json:"n,omitempty"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Duration is End - Start.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Add records s. A nil Timeline records nothing.
func (t *Timeline) Add(s Span) {
	if t == nil {
		return
	}
	limit := t.MaxSpans
	if limit <= 0 {
		limit = DefaultMaxSpans
	}
	t.mu.Lock()
	if len(t.spans) >= limit {
		n := copy(t.spans, t.spans[len(t.spans)-limit/2:])
		t.spans = t.spans[:n]
	}
	t.spans = append(t.spans, s)
	t.mu.Unlock()
}

// Spans returns a copy of the spans recorded, by start time.
func (t *Timeline) Spans() []Span {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	out := slices.Clone(t.spans)
	t.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return out
}

// interval is a half-open stretch of time; intervals is a sorted set of disjoint ones.
type interval struct{ a, b time.Time }
type intervals []interval

// union merges ivs into a sorted set of disjoint intervals.
func union(ivs []interval) intervals {
	s := slices.Clone(ivs)
	slices.SortFunc(s, func(x, y interval) int { return x.a.Compare(y.a) })
	var out intervals
	for _, iv := range s {
		if !iv.b.After(iv.a) {
			continue
		}
		if n := len(out); n > 0 && !iv.a.After(out[n-1].b) {
			if iv.b.After(out[n-1].b) {
				out[n-1].b = iv.b
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// minus returns the parts of s not covered by o.
func (s intervals) minus(o intervals) intervals {
	var out intervals
	for _, iv := range s {
		cur := iv
		for _, c := range o {
			if !c.b.After(cur.a) || !c.a.Before(cur.b) {
				continue
			}
			if c.a.After(cur.a) {
				out = append(out, interval{cur.a, c.a})
			}
			cur.a = c.b
			if !cur.b.After(cur.a) {
				break
			}
		}
		if cur.b.After(cur.a) {
			out = append(out, cur)
		}
	}
	return out
}

// within is how much of s lies inside [a, b).
func (s intervals) within(a, b time.Time) time.Duration {
	var d time.Duration
	for _, iv := range s {
		lo, hi := iv.a, iv.b
		if lo.Before(a) {
			lo = a
		}
		if hi.After(b) {
			hi = b
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}
