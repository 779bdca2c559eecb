package driver

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is the time a Run goes by: every step's ctx.Now is its Now, and a machine's SetTimer
// deadline (milliseconds on that same clock) is set with At. Config.Clock defaults to the
// real clock; a FakeClock lets a test move a monitor's clock hours ahead, or fire a
// retry timer, without waiting for it.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// At arranges for f to be called once the clock has reached t (at once, in its own
	// goroutine, when t is not after Now). stop cancels the call; it reports false when f
	// has already been called or stopped. The real clock waits the time left when At is
	// called, on Go's monotonic clock (time.AfterFunc): a wall-clock step after that does
	// not move the call. A restarted process sets the restored timers again at their
	// deadlines on the wall clock, so a machine whose safety rests on a wait restarts it
	// on Restarted (the cutover's grace period does).
	At(t time.Time, f func()) (stop func() bool)
}

// wallClock is the real clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) At(t time.Time, f func()) func() bool {
	return time.AfterFunc(time.Until(t), f).Stop
}

// FakeClock is a Clock that moves only when told to (Advance, Set): for tests and
// simulations that drive a real Run. It is safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	waiting []*fakeTimer
	changed chan struct{} // closed and replaced whenever waiting changes
}

type fakeTimer struct {
	at  time.Time
	seq uint64 // registration order: the tie-break between equal deadlines
	f   func()
}

// NewFakeClock returns a clock that reads start until it is moved.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

// Now implements Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// At implements Clock. A deadline that is not after Now is called at once, in its own
// goroutine (as time.AfterFunc does with a duration of zero); a later one waits for Advance
// or Set to reach it.
func (c *FakeClock) At(t time.Time, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.now) {
		go f()
		return func() bool { return false }
	}
	c.seq++
	ft := &fakeTimer{at: t, seq: c.seq, f: f}
	c.waiting = append(c.waiting, ft)
	c.notify()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.waiting, ft)
		if i < 0 {
			return false
		}
		c.waiting = slices.Delete(c.waiting, i, i+1)
		c.notify()
		return true
	}
}

// Advance moves the clock d forward (Set(Now()+d)).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	t := c.now.Add(d)
	c.mu.Unlock()
	c.Set(t)
}

// Set moves the clock to t (never back: an earlier t leaves it where it is) and calls the
// functions of the timers that are then due, earliest deadline first, before it returns:
// once Set returns, a Run has every firing it made due (it feeds them in its next step).
// The functions are called without the clock's lock, so they may use the clock.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	var due []*fakeTimer
	c.waiting = slices.DeleteFunc(c.waiting, func(ft *fakeTimer) bool {
		if ft.at.After(c.now) {
			return false
		}
		due = append(due, ft)
		return true
	})
	if len(due) > 0 {
		c.notify()
	}
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *fakeTimer) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.seq, b.seq)) })
	for _, ft := range due {
		ft.f()
	}
}

// Pending is the number of timers set and not yet due or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// WaitPending blocks until at least n timers are pending (a Run has set the timer the test
// is about to make due) or ctx ends. It does not sleep: it wakes on every change.
func (c *FakeClock) WaitPending(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		ok, changed := len(c.waiting) >= n, c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// notify wakes WaitPending; c.mu is held.
func (c *FakeClock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}
