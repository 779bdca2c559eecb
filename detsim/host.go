package detsim

import (
	"maps"
	"slices"

	"loam.dev/router/machine"
)

// Controller is the simulated daemon that runs the control-plane machines: one network
// node, one wall clock that can jump (clock.jump: machines see ctx.Now = simulated time +
// Offset), and one process that can restart (ctl.restart: every hosted machine is rebuilt
// from its last snapshot and fed its Restarted input; replies to what was in flight are
// lost).
//
// A jump moves ctx.Now but not a timer already set: the driver arms a machine's timer as
// time.AfterFunc of the time left when it is set (driver.Clock), and Go's timers run on
// the monotonic clock, which a wall-clock step does not move. A restarted process sets the
// timers of the restored snapshot again at their deadlines on the (jumped) wall clock, so
// after a restart they may fire early: a machine whose safety rests on a wait restarts
// that wait when it is restarted (the cutover's grace period does).
type Controller struct {
	s      *Sim
	Node   NodeID
	Offset int64
	hosts  []hostLife
	// Restarts counts the controller's restarts.
	Restarts int
}

type hostLife interface {
	crash()
	boot()
}

// NewController adds the controller node and registers its nemesis points.
func NewController(s *Sim, name string) *Controller {
	c := &Controller{s: s, Node: s.Net.AddNode(name)}
	s.OnNemesis("ctl.restart", func() {
		if !s.Net.Up(c.Node) {
			return
		}
		c.Crash()
		s.After(s.Between(100, 5000), Label{Kind: "boot", To: name}, c.Boot)
	})
	s.OnNemesis("clock.jump", func() {
		j := s.Between(1000, 300_000)
		c.Offset += j
		s.Note(Label{Kind: "clock-jump", To: name, ID: j})
	})
	s.OnHeal(c.Boot)
	return c
}

// Now is the controller's clock.
func (c *Controller) Now() int64 { return c.s.now + c.Offset }

// Crash stops the controller: its machines' timers are dropped and the network forgets
// its calls.
func (c *Controller) Crash() {
	c.s.Net.Crash(c.Node)
	for _, h := range c.hosts {
		h.crash()
	}
}

// Boot restarts a crashed controller: each machine is restored from its last snapshot and
// fed Restarted.
func (c *Controller) Boot() {
	if c.s.Net.Up(c.Node) {
		return
	}
	c.Restarts++
	c.s.Net.Restart(c.Node)
	for _, h := range c.hosts {
		h.boot()
	}
}

// Host runs one machine on a controller: it feeds inputs, turns SetTimer and CancelTimer
// into simulator events (in the controller's clock), hands every other command to Exec,
// and saves a snapshot after every step so a restart can restore it.
type Host[In, Out any] struct {
	Name string
	c    *Controller
	m    machine.Machine[In, Out]
	// Exec executes one command (not a timer): it makes the network calls and feeds each
	// answer back with Feed.
	exec func(Out)
	// timerIn builds the TimerFired input of the machine.
	timerIn func(id string) In
	// restarted is the machine's Restarted input.
	restarted In
	// feeding, when set, sees every input the machine is about to take.
	feeding func(In)
	// save returns a function that rebuilds the machine as it is now (from its snapshot);
	// nil when restarts are not simulated.
	save    func(machine.Machine[In, Out]) func() machine.Machine[In, Out]
	restore func() machine.Machine[In, Out]
	ctx     machine.Ctx

	timers map[string]*hostTimer
	// Steps counts the inputs fed.
	Steps int
}

type hostTimer struct {
	at int64 // in the controller's clock when it was set
	h  Handle
}

// HostConfig describes how to drive one machine type.
type HostConfig[In, Out any] struct {
	Name string
	// Exec executes every command that is not a timer command.
	Exec func(Out)
	// TimerFired builds the machine's timer input.
	TimerFired func(id string) In
	// Restarted is the machine's Restarted input.
	Restarted In
	// Save snapshots the machine and returns how to rebuild it (Restore of the snapshot).
	// A driver persists the snapshot after every step; the simulator takes it when the
	// controller crashes, which is the same state, since a crash falls between steps. Nil
	// is allowed only for a scenario that does not list ctl.restart.
	Save func(machine.Machine[In, Out]) func() machine.Machine[In, Out]
	// Feeding, when set, is called with every input the machine is about to take (not
	// with one dropped because its controller is down or restarted since the request):
	// what the machine was told, for a checker that follows its beliefs.
	Feeding func(In)
}

// NewHost starts hosting m on the controller.
func NewHost[In, Out any](c *Controller, m machine.Machine[In, Out], cfg HostConfig[In, Out]) *Host[In, Out] {
	h := &Host[In, Out]{Name: cfg.Name, c: c, m: m, exec: cfg.Exec, timerIn: cfg.TimerFired,
		restarted: cfg.Restarted, save: cfg.Save, feeding: cfg.Feeding, timers: map[string]*hostTimer{}}
	c.hosts = append(c.hosts, h)
	return h
}

// Machine returns the machine being hosted now (a new one after each restart).
func (h *Host[In, Out]) Machine() machine.Machine[In, Out] { return h.m }

// Feed gives the machine one input, at the controller's clock, and executes its commands.
// An input for a controller that is down is dropped (its process is gone) and Feed returns
// false.
func (h *Host[In, Out]) Feed(in In) bool {
	if !h.c.s.Net.Up(h.c.Node) {
		return false
	}
	h.Steps++
	if h.feeding != nil {
		h.feeding(in)
	}
	// One Ctx per host, refreshed each step: a machine may not keep it between steps.
	h.ctx = machine.Ctx{Now: h.c.s.now + h.c.Offset, Rand: h.c.s.rng, Trace: h.c.s}
	cmds := h.m.On(&h.ctx, in)
	for _, cmd := range cmds {
		switch t := any(cmd).(type) {
		case interface{ Timer() machine.SetTimer }:
			h.setTimer(t.Timer())
		case interface{ CancelledTimer() machine.CancelTimer }:
			h.cancelTimer(t.CancelledTimer().ID)
		default:
			h.exec(cmd)
		}
	}
	return true
}

// Caller returns a function that feeds an answer back only if the controller process that
// made the request is still the one running: an answer to a process that restarted is
// lost, as it would be.
func (h *Host[In, Out]) Caller() func(In) {
	inc := h.c.s.Net.Incarnation(h.c.Node)
	return func(in In) {
		if h.c.s.Net.Incarnation(h.c.Node) == inc {
			h.Feed(in)
		}
	}
}

func (h *Host[In, Out]) setTimer(t machine.SetTimer) {
	h.cancelTimer(t.ID)
	ht := &hostTimer{at: t.At}
	h.timers[t.ID] = ht
	h.arm(t.ID, ht)
}

func (h *Host[In, Out]) arm(id string, ht *hostTimer) {
	ht.h = h.c.s.At(ht.at-h.c.Offset, Label{Kind: "timer", To: h.Name, What: id}, func() {
		if h.timers[id] == ht {
			delete(h.timers, id)
			h.Feed(h.timerIn(id))
		}
	})
}

func (h *Host[In, Out]) cancelTimer(id string) {
	if ht, ok := h.timers[id]; ok {
		h.c.s.Cancel(ht.h)
		delete(h.timers, id)
	}
}

func (h *Host[In, Out]) crash() {
	if h.save != nil {
		h.restore = h.save(h.m) // what the driver persisted after the last step
	}
	for _, id := range slices.Sorted(maps.Keys(h.timers)) {
		h.cancelTimer(id)
	}
}

func (h *Host[In, Out]) boot() {
	if h.restore == nil {
		panic("detsim: controller restarted but machine " + h.Name + " has no snapshot (HostConfig.Save)")
	}
	h.m = h.restore()
	h.c.s.Probe("ctl.restored." + h.Name)
	h.Feed(h.restarted)
}

// PendingTimers lists the machine's pending timer ids, sorted (for state hashing).
func (h *Host[In, Out]) PendingTimers() []string { return slices.Sorted(maps.Keys(h.timers)) }
