package causal

import (
	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
)

// Input is what the driver feeds the machine.
type Input interface{ isInput() }

// SetHostgroup replaces the members of Hostgroup (an empty list removes it). A member listed
// twice counts once. Waiting requests for the hostgroup are re-examined at once.
type SetHostgroup struct {
	Hostgroup int
	Endpoints []lsn.Endpoint
}

// Sampled is one poll of an endpoint by the monitor, successful or not. Samples of one
// endpoint must arrive in send order; one that does not is dropped (see RejectedSamples).
type Sampled struct {
	Endpoint lsn.Endpoint
	Sample   lsn.Sample
}

// Executed reports that an application execution of Frontend on Endpoint, routed to
// Hostgroup, has completed; ctx.Now must be read after the completion was received. It
// replaces the frontend's record for Hostgroup.
type Executed struct {
	Frontend  string
	Hostgroup int
	Endpoint  lsn.Endpoint
}

// Acquire is an ordinary request: any member of Hostgroup may serve it.
type Acquire struct {
	ID        uint64
	Frontend  string
	Hostgroup int
}

// AcquireCausal is a request whose rule names a source hostgroup (lsn_from_hostgroup): only
// members of Hostgroup that have reached the frontend's last execution on From may serve it.
// Deadline (ms, ctx.Now's clock) is the ordinary acquisition deadline.
type AcquireCausal struct {
	ID        uint64
	Frontend  string
	Hostgroup int
	From      int
	Deadline  int64
}

// Cancel withdraws a waiting request whose caller gave up. Unknown IDs are ignored.
type Cancel struct{ ID uint64 }

// Disconnected forgets a frontend: its records and its waiting requests.
type Disconnected struct{ Frontend string }

// TimerFired reports that the timer ID set by a SetTimer command has passed.
type TimerFired struct{ ID string }

func (SetHostgroup) isInput()  {}
func (Sampled) isInput()       {}
func (Executed) isInput()      {}
func (Acquire) isInput()       {}
func (AcquireCausal) isInput() {}
func (Cancel) isInput()        {}
func (Disconnected) isInput()  {}
func (TimerFired) isInput()    {}

// Command is what the machine asks the driver to do. Commands of one step are executed in
// the order given.
type Command interface{ isCommand() }

// Route tells the driver that request ID may be served by Endpoints, to be tried in this
// order within the request's deadline. For a constrained causal route, every endpoint had
// reached Requirement when the route was made. The request is finished as far as the machine
// is concerned; the driver reports the execution that follows with Executed.
type Route struct {
	ID          uint64
	Endpoints   []lsn.Endpoint
	Causal      bool    // the request was an AcquireCausal
	Constrained bool    // Requirement applies (false when the frontend had no record for From)
	Requirement lsn.LSN // meaningful only when Constrained
}

// Fail tells the driver to fail request ID with Err (see ErrNoEndpoints, ErrNotReached,
// ErrDuplicateRequest, ErrDisconnected).
type Fail struct {
	ID  uint64
	Err error
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At.
type SetTimer struct{ machine.SetTimer }

// CancelTimer asks the driver to drop timer ID; a TimerFired that raced it is ignored.
type CancelTimer struct{ machine.CancelTimer }

func (Route) isCommand()       {}
func (Fail) isCommand()        {}
func (SetTimer) isCommand()    {}
func (CancelTimer) isCommand() {}
