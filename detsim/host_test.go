package detsim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/machine"
)

// pinger is a tiny machine for the host tests: Start sends a Ping and arms a retry timer
// 1000 ms out on its own clock; a Pong ends it; each retry sends Ping again.
type pinger struct {
	attempts int
	done     bool
}

type pingIn struct {
	start, pong, restarted bool
	timer                  string
}

type pingOut struct {
	ping  bool
	timer *machine.SetTimer
}

type pingTimer struct{ machine.SetTimer }

func (p *pinger) On(ctx *machine.Ctx, in pingIn) []any {
	switch {
	case in.pong:
		p.done = true
		return nil
	case p.done:
		return nil
	}
	p.attempts++
	ctx.Emit("Ping", "Send", machine.I("attempt", int64(p.attempts)))
	return []any{"ping", pingTimer{machine.SetTimer{ID: "retry", At: ctx.Now + 1000}}}
}

func TestHostTimersRestartsAndClockJumps(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1, AllFaults: true, Points: []string{"ctl.restart"}})
	c := detsim.NewController(s, "ctl")
	var sent []int64
	var h *detsim.Host[pingIn, any]
	m := &pinger{}
	h = detsim.NewHost[pingIn, any](c, m, detsim.HostConfig[pingIn, any]{
		Name:       "pinger",
		Exec:       func(any) { sent = append(sent, s.Now()) },
		TimerFired: func(string) pingIn { return pingIn{timer: "retry"} },
		Restarted:  pingIn{restarted: true},
		Save: func(mm machine.Machine[pingIn, any]) func() machine.Machine[pingIn, any] {
			snap := *mm.(*pinger)
			return func() machine.Machine[pingIn, any] { p := snap; return &p }
		},
	})
	h.Feed(pingIn{start: true})
	s.Run(2300, 100)
	require.Equal(t, []int64{0, 1000, 2000}, sent, "the retry timer fires on the controller's clock")

	c.Offset += 600 // a forward wall-clock jump: the pending timer keeps its time; the next one is set on the jumped clock
	sent = nil
	s.Run(3500, 100)
	require.Equal(t, []int64{3000}, sent, "a timer set before the jump fires when it would have")

	sent = nil
	c.Crash()
	s.Run(10_000, 100)
	require.Empty(t, sent, "a crashed controller's timers do not fire")
	before := h.Machine().(*pinger).attempts
	c.Boot()
	require.NotSame(t, m, h.Machine(), "the machine is rebuilt from its snapshot")
	require.Equal(t, before+1, h.Machine().(*pinger).attempts, "and fed Restarted")
	late := h.Caller()
	c.Crash()
	c.Boot()
	steps := h.Steps
	late(pingIn{pong: true})
	require.Equal(t, steps, h.Steps, "an answer to a process that restarted is lost")
	h.Caller()(pingIn{pong: true})
	require.True(t, h.Machine().(*pinger).done)
	s.Run(math.MaxInt64, 100)
}

// waiter sets one timer and, restarted, sets it again at the deadline it saved, as the
// control-plane machines do with their pending timers.
type waiter struct{ at int64 }

type waiterTimer struct{ machine.SetTimer }

func (w waiterTimer) Timer() machine.SetTimer { return w.SetTimer }

func (w *waiter) On(ctx *machine.Ctx, in string) []any {
	switch in {
	case "start":
		w.at = ctx.Now + 1000
	case "restarted":
	default:
		return []any{"fired"}
	}
	return []any{waiterTimer{machine.SetTimer{ID: "w", At: w.at}}}
}

// TestClockJumpKeepsTimersUntilRestart: a wall-clock jump does not move a timer already set
// (the driver's timers are time.AfterFunc durations, on Go's monotonic clock); a restarted
// controller sets the restored timers at their deadlines on the jumped clock, so they fire
// that much earlier.
func TestClockJumpKeepsTimersUntilRestart(t *testing.T) {
	for _, restart := range []bool{false, true} {
		s := detsim.New(detsim.Config{Seed: 1})
		c := detsim.NewController(s, "ctl")
		var fired []int64
		h := detsim.NewHost[string, any](c, &waiter{}, detsim.HostConfig[string, any]{
			Name: "w", Exec: func(any) { fired = append(fired, s.Now()) },
			TimerFired: func(string) string { return "timer" },
			Restarted:  "restarted",
			Save: func(mm machine.Machine[string, any]) func() machine.Machine[string, any] {
				snap := *mm.(*waiter)
				return func() machine.Machine[string, any] { w := snap; return &w }
			},
		})
		h.Feed("start") // due at 1000 on the controller's clock, which is simulated time for now
		s.Run(200, 1)
		c.Offset = 400 // the wall clock steps 400 ms forward
		if restart {
			c.Crash()
			c.Boot()
		}
		s.Run(math.MaxInt64, 1)
		if restart {
			require.Equal(t, []int64{600}, fired, "restored, the timer is set at 1000 on a clock 400 ahead")
		} else {
			require.Equal(t, []int64{1000}, fired, "the timer set before the jump fires when it would have")
		}
	}
}
