// Package detsim is the deterministic simulator: it plays the driver for the control-plane
// machines with a simulated clock, a simulated network and in-memory models of the systems
// the adapters talk to, so that every schedule of a run is a function of one seed.
//
// # One seed decides everything
//
// New seeds one rand.NewChaCha8 and derives from it, before anything else, the run's
// options (network timings, which fault points are enabled and how often they fire). From
// then on every choice comes from the same source: the order of events due at the same
// time (a tie-break drawn when an event is scheduled), message delays, drops, duplicates,
// fault firings, the workload, and the machines' own jitter (ctx.Rand is the same source).
// Simulated time moves only when an event runs; machines see it as ctx.Now.
//
// The loop a scenario runs is the machine package's driver loop with the world simulated:
//
//	s := detsim.New(detsim.Config{Scenario: "cutover", Seed: seed, Points: points})
//	// add nodes (s.Net.AddNode), models, machines and their executors, the workload
//	s.StartNemesis()               // fault points evaluated on a tick until the window closes
//	s.Run(until, maxSteps)         // events in order; models and machines run inside them
//	// check the history: no acknowledged write lost, no write after the fence, ...
//
// # Network
//
// Network.Call sends a request over a directed link with a drawn delay (a slow link
// multiplies it); the handler answers at once or later; the caller's callback runs exactly
// once with the reply, a *RefusedError (the peer was down: nothing applied) or an
// *IndeterminateError (a timeout or a reset: the request may have applied). Partitions cut
// one or both directions of a pair of nodes. Checkers treat every indeterminate outcome as
// "may have applied", never as a failure of the system under test.
//
// # Fault points and swarm testing
//
// Models call Fault(s, "name") where the Catalogue says; each run enables a random subset of
// the scenario's points, each with its own probability (swarm testing), and nemesis points
// (crashes, partitions, restarts) are evaluated on a periodic tick until the fault window
// closes. Then the run heals and a quiet period lets the system converge. Config.Force
// (RunOptions.Force) sets chosen points on or off after the swarm's draw, the rest of the
// seed's run as it was: a test shows a point matters by a mutant it makes trip, or a probe
// of the window it opens, on the same seeds.
//
// # Trace hash, replay, shrinking
//
// Every event that runs, every fault that fires and every spec event a machine emits is
// hashed (SHA-256) as one canonical JSON line: the same seed gives the same hash, which the
// corpus test asserts for every corpus seed. A failing run is shrunk by delta debugging
// over its fault firings and workload operations (Scenario.Shrink); the Schedule that
// remains, printed as text, replays the failure exactly with the same seed:
//
//	go test ./detsim/... -run 'TestSim/cutover$' -seed=N -schedule='ops=0,3;faults=pgdog.crash#2'
//
// Report prints a failure self-contained, as pebble's metamorphic tests do: SEED, OPTIONS,
// SCHEDULE, OPS, FAULTS and HISTORY.
//
// # Machines on a simulated daemon
//
// A Controller is the daemon's process: its clock can jump (clock.jump) and it can restart
// (ctl.restart). A Host runs one machine on it: SetTimer and CancelTimer become events on
// the controller's clock, every other command goes to the scenario's executor, which makes
// network calls to the models and feeds each answer back; on a restart the machine is
// rebuilt from its snapshot and fed its Restarted input.
//
// # Exhaustive mode
//
// For tiny configurations Explore enumerates every schedule instead of sampling: every
// choice (which pending event runs next, whether a fault fires while the budget lasts)
// becomes a branch taken from a Tape, and a visited set of state hashes cuts subtrees that
// start in a state already explored. Messages take no time when exploring (so every message
// in flight may arrive in any order, and time moves only by timers), machines' jitter is
// constant, and nemesis points are evaluated after every step: equal states reached by
// different orders then hash equal. The state hash must hold whatever decides a checker's
// verdict (see SetStateHasher); a counterexample replays from its choices (ReplayTiny).
package detsim
