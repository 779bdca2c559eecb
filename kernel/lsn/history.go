package lsn

import (
	"errors"
	"fmt"
)

// ErrOutOfOrder is wrapped when a sample is not sent strictly after the endpoint's latest
// sample. One monitor connection polls an endpoint one poll at a time, so send times only
// grow; a sample that breaks this comes from a second poller or a clock that went back, and
// accepting it could let a stale position answer for a later time.
var ErrOutOfOrder = errors.New("lsn: sample out of order")

// DefaultWindow is the history window in milliseconds (pgsql-monitor_lsn_history).
const DefaultWindow int64 = 60_000

// Sample is one poll of an endpoint's progress.
type Sample struct {
	// Sent is the driver's clock (milliseconds) read just before the poll was sent. It must
	// not be later than the real send: a late stamp would claim the position covers commits
	// acknowledged before the stamp but after the poll.
	Sent int64
	// LSN is the insertion position of a primary (normalised, see WALLayout.InsertProgress) or
	// the replay position of a standby. Meaningful only when Known.
	LSN LSN
	// Known is false when the poll failed, timed out, or the server reported no position.
	Known bool
}

// Observed is a successful sample.
func Observed(sent int64, l LSN) Sample { return Sample{Sent: sent, LSN: l, Known: true} }

// Unknown is a failed poll: progress withdrawn until the next successful one.
func Unknown(sent int64) Sample { return Sample{Sent: sent} }

// point is a retained successful sample; 16 bytes.
type point struct {
	sent int64
	lsn  LSN
}

// pointBytes is the size of one retained sample in the backing array.
const pointBytes = 16

// historyBytes is the size of a History value itself (window, slice header, head, latest
// sample, flags), counted by Footprint.
const historyBytes = 72

// mutant names a deliberately wrong variant of the pruning, used only by tests to show that
// the property checks can fail (see export_test.go).
type mutant uint8

const (
	mutantNone            mutant = iota
	mutantKeepFirstOfRun         // progress pruning keeps the oldest sample of a run instead of the newest
	mutantNoProgressPrune        // every successful sample is retained
	mutantNoAnchor               // age pruning drops every sample outside the window
	mutantNoAgePrune             // nothing ages out
)

// History is the retained progress of one endpoint (see the package doc for what is kept and
// why). The zero value is not usable; call NewHistory.
type History struct {
	window int64
	pts    []point // retained successful samples in send order: pts[head:]
	head   int
	latest Sample
	seen   bool // latest is set
	mutant mutant
}

// NewHistory returns an empty history with the given window in milliseconds; a window of 0 or
// less means DefaultWindow.
func NewHistory(window int64) *History {
	if window <= 0 {
		window = DefaultWindow
	}
	return &History{window: window}
}

// Window returns the history window in milliseconds.
func (h *History) Window() int64 { return h.window }

// Record adds a sample and prunes. It returns an error wrapping ErrOutOfOrder, and changes
// nothing, when s was not sent strictly after the latest sample.
func (h *History) Record(s Sample) error {
	if h.seen && s.Sent <= h.latest.Sent {
		return fmt.Errorf("%w: sent at %d ms, not after the latest sample sent at %d ms (one poller per endpoint, monotonic clock)", ErrOutOfOrder, s.Sent, h.latest.Sent)
	}
	h.latest, h.seen = s, true
	if s.Known {
		live := h.pts[h.head:]
		n := len(live)
		switch {
		case n > 0 && live[n-1].lsn == s.LSN && h.mutant == mutantKeepFirstOfRun:
			// mutant: the newest observation of the run is dropped.
		case n > 0 && live[n-1].lsn == s.LSN && h.mutant != mutantNoProgressPrune:
			live[n-1].sent = s.Sent // progress pruning: the newer real sample replaces the older
		default:
			h.pts = append(h.pts, point{s.Sent, s.LSN})
		}
	}
	h.Prune(s.Sent)
	return nil
}

// Prune applies age pruning as of now (milliseconds): every retained sample sent more than
// the window before now is dropped except the newest of them, the anchor. Record calls it;
// call it directly only to age an endpoint that is no longer polled.
func (h *History) Prune(now int64) {
	if h.mutant == mutantNoAgePrune {
		return
	}
	cutoff := now - h.window
	anchor := 1
	if h.mutant == mutantNoAnchor {
		anchor = 0
	}
	// Drop the oldest sample while the one after it is outside the window too: the newest
	// sample outside the window survives as the anchor.
	for h.Len() > anchor && h.pts[h.head+anchor].sent < cutoff {
		h.head++
	}
	h.compact()
}

// compact returns dropped slots to the allocator once they are at least as many as the live
// ones (and at least 8), or once the backing array is more than four times the live samples
// plus 16, so a history never holds more than 4*Len()+16 slots (amortised O(1) per sample).
func (h *History) compact() {
	live := len(h.pts) - h.head
	if h.head < max(live, 8) && cap(h.pts) <= 4*live+16 {
		return
	}
	n := make([]point, live, 2*live+4)
	copy(n, h.pts[h.head:])
	h.pts, h.head = n, 0
}

// After returns the first retained successful sample sent strictly after t, and false when
// there is none yet (the requirement is pending until the next successful poll). Its
// position is at or beyond every commit acknowledged by t.
func (h *History) After(t int64) (Sample, bool) {
	live := h.pts[h.head:]
	lo, hi := 0, len(live)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if live[mid].sent > t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == len(live) {
		return Sample{}, false
	}
	return Observed(live[lo].sent, live[lo].lsn), true
}

// Latest returns the most recent sample, successful or not, and false before the first.
func (h *History) Latest() (Sample, bool) { return h.latest, h.seen }

// Reached reports whether the endpoint's latest sample is successful and at or beyond target.
// A failed latest poll withdraws the endpoint: it has reached nothing until it answers again.
func (h *History) Reached(target LSN) bool {
	return h.seen && h.latest.Known && h.latest.LSN >= target
}

// Len is the number of retained successful samples.
func (h *History) Len() int { return len(h.pts) - h.head }

// Footprint is the bytes this history holds: the History value and its whole backing array
// (retained samples plus dropped slots not yet compacted).
func (h *History) Footprint() int { return historyBytes + cap(h.pts)*pointBytes }

// Samples returns a copy of the retained successful samples, oldest first.
func (h *History) Samples() []Sample {
	out := make([]Sample, 0, h.Len())
	for _, p := range h.pts[h.head:] {
		out = append(out, Observed(p.sent, p.lsn))
	}
	return out
}

// Clone returns an independent copy.
func (h *History) Clone() *History {
	c := *h
	c.pts = append([]point(nil), h.pts[h.head:]...)
	c.head = 0
	return &c
}
