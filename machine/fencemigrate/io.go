package fencemigrate

import (
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
)

// Input is what the driver feeds in: pod reports, operator requests, replies and timers.
type Input interface{ isInput() }

// PodReported says a pod now runs script version Version (sent by the pod at start-up, or
// read from where pods report; see adapters/valkey Executor.Versions).
//
// The machine knows only the pods it is told of, and "every pod reports A" is over those. So
// the driver must take the fleet from the deploy system and feed every pod of it, a pod
// that has not reported as O (legacy pods never report): learnt from reports alone, a
// fleet can span O and B, and two pods grant one session (the simulator's mutant
// fencing-roster-from-reports; loamrouter's fencing.pods).
type PodReported struct {
	Pod     string
	Version fencing.Version
}

// PodGone says a pod has left the fleet and will not run any script again.
type PodGone struct{ Pod string }

// Advance is the operator's request to allow the next script version fleet-wide.
type Advance struct{ To fencing.Version }

// StartBackfill is the operator's request to fold the old counters into the new ones.
type StartBackfill struct{}

// BackfillDone answers RunBackfill: Sessions counters were raised (0 on a second run), or Err.
type BackfillDone struct {
	Step     string
	Sessions int
	Err      error
}

// OldLeasesScanned answers ScanOldLeases: Live old-key leases were found on every primary.
type OldLeasesScanned struct {
	Step string
	Live int
	Err  error
}

// RequestEnable is the operator's request to enable cluster mode. The machine answers with
// AskConfirmation when the gates hold; nothing irreversible happens until Confirm.
type RequestEnable struct{}

// Confirm is the operator's explicit confirmation, echoing AskConfirmation's Token.
type Confirm struct{ Token string }

// ClusterEnabled answers EnableCluster.
type ClusterEnabled struct {
	Step string
	Err  error
}

// TimerFired is machine.TimerFired as an input of this machine.
type TimerFired struct{ machine.TimerFired }

func (PodReported) isInput()      {}
func (PodGone) isInput()          {}
func (Advance) isInput()          {}
func (StartBackfill) isInput()    {}
func (BackfillDone) isInput()     {}
func (OldLeasesScanned) isInput() {}
func (RequestEnable) isInput()    {}
func (Confirm) isInput()          {}
func (ClusterEnabled) isInput()   {}
func (TimerFired) isInput()       {}

// Command is what the machine asks the driver to do.
type Command interface{ isCommand() }

// AllowVersion tells the deploy system that pods may now run Version. Nothing is fed back
// directly: pods report their version as they restart (PodReported).
type AllowVersion struct {
	Step    string
	Version fencing.Version
}

// RunBackfill asks the driver to run the backfill script over every session (executor
// Backfill) and to answer with BackfillDone carrying Step.
type RunBackfill struct{ Step string }

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At.
type SetTimer struct{ machine.SetTimer }

// ScanOldLeases asks the driver to count live old-key leases with a scan that is complete on
// every primary (executor LiveOldLeases) and to answer with OldLeasesScanned carrying Step.
type ScanOldLeases struct{ Step string }

// AskConfirmation asks the operator to confirm the irreversible step; the operator answers
// with Confirm{Token} (or nothing).
type AskConfirmation struct {
	Step   string
	Token  string
	Reason string
}

// EnableCluster asks the driver to enable cluster mode — the one-way door — and to answer
// with ClusterEnabled carrying Step. Issued at most once per confirmed request.
type EnableCluster struct{ Step string }

// Refused says a request was not carried out because Gate does not hold; Detail says what is
// missing and what to do.
type Refused struct {
	Request string
	Gate    Gate
	Detail  string
}

// Err returns the refusal as an error wrapping ErrRefused, for drivers that return it.
func (r Refused) Err() error { return &GateError{Request: r.Request, Gate: r.Gate, Detail: r.Detail} }

// Alarm says the fleet did something the machine did not allow (a pod outside the version
// window). The operator must look: old-key authority may have come back.
type Alarm struct {
	Pod    string
	Detail string
}

func (AllowVersion) isCommand()    {}
func (RunBackfill) isCommand()     {}
func (SetTimer) isCommand()        {}
func (ScanOldLeases) isCommand()   {}
func (AskConfirmation) isCommand() {}
func (EnableCluster) isCommand()   {}
func (Refused) isCommand()         {}
func (Alarm) isCommand()           {}
