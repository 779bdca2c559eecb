package driver

import (
	"context"

	"loam.dev/router/machine"
)

// Machine is what the driver needs of a machine: On, and a snapshot it can persist. Snap
// must round-trip through encoding/json (every machine's tests check that theirs does).
type Machine[In, Cmd, Snap any] interface {
	On(ctx *machine.Ctx, in In) []Cmd
	Snapshot() Snap
}

// Executor carries out one kind of machine's commands against the seams. It is the only
// place that knows which adapter a command goes to, and it holds no protocol logic: it
// performs the one call the command's doc names and turns the outcome, success or error,
// into the input the doc says to feed back.
//
// Execute must not retry (retrying is the machine's decision), must return when ctx ends,
// and reports reply=false for a command that expects no reply (a report). The driver calls
// Execute concurrently for independent commands, and one at a time, in issue order, for
// commands Kind.Ordered marks. Timer commands never reach it.
type Executor[In, Cmd any] interface {
	Execute(ctx context.Context, cmd Cmd) (in In, reply bool)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc[In, Cmd any] func(ctx context.Context, cmd Cmd) (In, bool)

// Execute calls f.
func (f ExecutorFunc[In, Cmd]) Execute(ctx context.Context, cmd Cmd) (In, bool) { return f(ctx, cmd) }

// Kind binds one machine type to the driver. ConfigPush, InDoubt, Cutover and Failover
// return the kinds of this repository's machines; a new machine needs only a Kind of its
// own (see Example).
type Kind[In, Cmd, Snap any] struct {
	// Name names the kind in snapshot keys ("machine/<Name>/<id>") and in logs.
	Name string
	// New makes a machine when the store holds no snapshot for it.
	New func() Machine[In, Cmd, Snap]
	// Restore rebuilds a machine from its last persisted snapshot.
	Restore func(Snap) (Machine[In, Cmd, Snap], error)
	// Restarted is the input fed first to a restored machine, so it re-issues what was in
	// flight when the previous driver stopped.
	Restarted In
	// Timer turns a timer firing into the machine's input.
	Timer func(machine.TimerFired) In
	// Exec executes every command that is not a timer command.
	Exec Executor[In, Cmd]
	// Ordered, when set, marks the commands that must reach their target in the order
	// they were issued (an alert raised then cleared): they run one at a time, in order.
	// The others run concurrently.
	Ordered func(Cmd) bool
}
