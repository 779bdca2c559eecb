// Package machine is the contract every Loam Router state machine keeps: it consumes one
// input at a time and returns the commands its driver must execute, and it never does I/O.
//
// The loop a driver runs (drivers live in loam.dev/router/driver; the simulator in
// loam.dev/router/detsim plays the same part with a simulated clock and network):
//
//	ctx := &machine.Ctx{Now: clock(), Rand: rng, Trace: sink}
//	cmds := m.On(ctx, start)
//	for len(cmds) > 0 || waiting {
//	    for _, c := range cmds {
//	        // Execute c through an adapter (pgx, a PgDog admin connection, the store...).
//	        // Its reply, or its failure, becomes the next input.
//	    }
//	    in := nextReplyOrTimer()
//	    ctx.Now = clock()
//	    cmds = m.On(ctx, in)
//	}
//
// Why the rule is so strict: a machine that reads no clock, no environment and no socket is
// a pure function of its inputs and the Ctx it is handed, so the simulator can replay any
// schedule bit for bit from a seed, a failing schedule can be shrunk, and a trace can be
// checked against the TLA+ spec of the protocol. Time is ctx.Now (milliseconds, supplied by
// the driver); randomness is ctx.Rand; waiting is a SetTimer command answered later by a
// TimerFired input. The test in this package (TestPurity) enforces the rule for every package
// under machine/ and kernel/.
//
// Every transition a machine takes is reported as a SpecEvent through ctx.Emit, named after
// the spec action it implements. Drivers write the events as canonical JSON lines (see
// Encoder) so a trace file can be read back (see Decoder) and validated against the spec.
package machine
