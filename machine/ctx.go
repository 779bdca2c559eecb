package machine

import "math/rand/v2"

// Ctx is everything ambient a machine may use, handed in by its driver on every step.
// A machine must not keep a Ctx between steps: the driver may hand a new one each time.
type Ctx struct {
	// Now is the driver's clock in milliseconds: wall time in production, simulated time
	// in detsim. Machines compare it with deadlines they were given or computed earlier.
	Now int64
	// Rand is the only source of randomness a machine may use (jitter, ids). Drivers seed
	// it from crypto/rand; detsim seeds it with rand.NewChaCha8 from the run's seed.
	Rand *rand.Rand
	// Trace receives a SpecEvent for every transition. Nil discards them.
	Trace TraceSink
}

// Emit reports one transition to ctx.Trace, stamped with ctx.Now.
func (c *Ctx) Emit(spec, action string, fields ...Field) {
	if c.Trace == nil {
		return
	}
	c.Trace.Emit(SpecEvent{Spec: spec, Action: action, Fields: fields, T: c.Now})
}

// Machine is the shape of every state machine: one input in, the commands to execute out.
// On never blocks, never reads a clock or the environment, never starts a goroutine and
// never touches a socket or a file; everything it needs arrives in ctx and in.
type Machine[In, Out any] interface {
	On(ctx *Ctx, in In) []Out
}
