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

	c.Offset += 600 // a forward jump: the pending timer (due at 3000 on the controller's clock) comes 600 ms earlier
	detsim.RearmForTest(c)
	sent = nil
	s.Run(2500, 100)
	require.Equal(t, []int64{2400}, sent)

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

func TestClockJumpRearmsTimers(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1})
	c := detsim.NewController(s, "ctl")
	var fired []int64
	h := detsim.NewHost[pingIn, any](c, &pinger{}, detsim.HostConfig[pingIn, any]{
		Name: "p", Exec: func(any) { fired = append(fired, s.Now()) },
		TimerFired: func(string) pingIn { return pingIn{timer: "retry"} },
	})
	h.Feed(pingIn{start: true})
	require.Equal(t, []string{"retry"}, h.PendingTimers())
	c.Offset = 400
	detsim.RearmForTest(c)
	s.Run(math.MaxInt64, 1)
	require.Equal(t, []int64{0, 600}, fired, "the timer due at 1000 on the controller's clock fires at simulated 600")
}
