package driver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/driver"
	"loam.dev/router/machine"
)

// An alarm machine, for the clock's tests and example: Start sets an alarm at Now+After
// and, when Also is set, a second one at Now+Also that the first cancels; the first
// reports the time it went off at.
type (
	alarmInput     interface{ isAlarm() }
	alarmStart     struct{ After, Also time.Duration }
	alarmFired     machine.TimerFired
	alarmRestarted struct{}

	alarmCommand interface{}
	alarmSet     struct{ machine.SetTimer }
	alarmCancel  struct{ machine.CancelTimer }
	alarmRang    struct{ At int64 } // executor: report, no answer

	alarm struct{ Seen []int64 } // ctx.Now of every step
)

func (alarmStart) isAlarm()     {}
func (alarmFired) isAlarm()     {}
func (alarmRestarted) isAlarm() {}

func (a *alarm) Snapshot() alarm { return *a }

func (a *alarm) On(ctx *machine.Ctx, in alarmInput) []alarmCommand {
	a.Seen = append(a.Seen, ctx.Now)
	switch in := in.(type) {
	case alarmStart:
		out := []alarmCommand{alarmSet{machine.SetTimer{ID: "alarm", At: ctx.Now + in.After.Milliseconds()}}}
		if in.Also > 0 {
			out = append(out, alarmSet{machine.SetTimer{ID: "also", At: ctx.Now + in.Also.Milliseconds()}})
		}
		return out
	case alarmFired:
		return []alarmCommand{alarmCancel{machine.CancelTimer{ID: "also"}}, alarmRang{ctx.Now}}
	}
	return nil
}

// alarmKind runs m, sending what rings to rang.
func alarmKind(m *alarm, rang func(at time.Time)) driver.Kind[alarmInput, alarmCommand, alarm] {
	type M = driver.Machine[alarmInput, alarmCommand, alarm]
	return driver.Kind[alarmInput, alarmCommand, alarm]{
		Name:      "alarm",
		New:       func() M { return m },
		Restore:   func(s alarm) (M, error) { return &s, nil },
		Restarted: alarmRestarted{},
		Timer:     func(t machine.TimerFired) alarmInput { return alarmFired(t) },
		Exec: driver.ExecutorFunc[alarmInput, alarmCommand](func(_ context.Context, c alarmCommand) (alarmInput, bool) {
			if r, ok := c.(alarmRang); ok {
				rang(time.UnixMilli(r.At))
			}
			return nil, false
		}),
	}
}

// TestRunOnFakeClock: a run on a FakeClock sees the fake time as ctx.Now, its timers are set
// on that clock and fire once it reaches them, and a cancelled timer is gone from the clock.
func TestRunOnFakeClock(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := driver.NewFakeClock(start)
	m := &alarm{}
	var mu sync.Mutex
	var rang []int64
	kind := alarmKind(m, func(at time.Time) { mu.Lock(); rang = append(rang, at.UnixMilli()); mu.Unlock() })
	done := make(chan error, 1)
	go func() {
		done <- driver.Run(t.Context(), kind, driver.Config[alarmInput]{ID: "a", Logger: quiet, Trace: machine.Discard, Clock: clock},
			alarmInput(alarmStart{After: time.Hour, Also: 2 * time.Hour}))
	}()
	wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, clock.WaitPending(wait, 2), "the run sets both timers on the fake clock")
	clock.Advance(time.Hour - time.Millisecond)
	require.Equal(t, 2, clock.Pending(), "nothing fires a millisecond early (Advance calls what is due before it returns)")
	clock.Advance(time.Millisecond)
	select {
	case err := <-done:
		require.NoError(t, err, "the alarm fired and cancelled the other timer: the run is idle")
	case <-wait.Done():
		t.Fatalf("the alarm did not fire when the clock reached it (timers pending: %d)", clock.Pending())
	}
	require.Zero(t, clock.Pending(), "the cancelled timer is stopped on the clock")
	require.Equal(t, []int64{start.Add(time.Hour).UnixMilli()}, rang)
	require.Equal(t, []int64{start.UnixMilli(), start.Add(time.Hour).UnixMilli()}, m.Seen, "ctx.Now is the fake clock's")
}

// TestFakeClock: timers fire when Set or Advance reaches them, earliest first and in the
// order they were set when equal, before Set returns; a deadline already past fires at
// once; stop reports whether it stopped anything; the clock never goes back.
func TestFakeClock(t *testing.T) {
	start := time.Unix(1000, 0)
	c := driver.NewFakeClock(start)
	var mu sync.Mutex
	var got []string
	note := func(s string) func() { return func() { mu.Lock(); got = append(got, s); mu.Unlock() } }
	c.At(start.Add(3*time.Second), note("c"))
	c.At(start.Add(time.Second), note("a1"))
	c.At(start.Add(time.Second), note("a2"))
	stopB := c.At(start.Add(2*time.Second), note("b"))
	c.At(start.Add(time.Hour), note("late"))
	require.Equal(t, 5, c.Pending())

	require.True(t, stopB())
	require.False(t, stopB(), "stopped twice")
	c.Advance(3 * time.Second)
	require.Equal(t, []string{"a1", "a2", "c"}, got, "called before Advance returned, in deadline order")
	require.Equal(t, 1, c.Pending())

	c.Set(start)
	require.Equal(t, start.Add(3*time.Second), c.Now(), "Set never moves the clock back")

	past := make(chan struct{})
	stop := c.At(start, func() { close(past) })
	<-past
	require.False(t, stop(), "a deadline already past fired at once")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.WaitPending(ctx, 2), context.DeadlineExceeded)
	go c.At(c.Now().Add(time.Minute), note("more"))
	require.NoError(t, c.WaitPending(t.Context(), 2))
}
