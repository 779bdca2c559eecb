package configpush

import (
	"loam.dev/router/kernel/render"
	"loam.dev/router/machine"
)

// Command is what the machine asks its driver to do. The driver executes the commands of one
// On call in any order and in parallel, each to completion or failure, and feeds every reply
// back as an Input; it never retries on its own (retrying is the machine's decision, made
// with backoff and an attempt count). The one ordering rule is the driver's persistence: the
// machine's Snapshot is saved after On returns and before its commands are executed, so
// after a crash every command is re-issued (see Restarted) and none is lost.
//
// Step is a deterministic id: "g<gen>/files", "g<gen>/reload/<instance>",
// "g<gen>/observe/<instance>". An executor may use Step and Attempt as an idempotency key:
// a command issued again after a restart carries the same pair.
type Command interface{ isCommand() }

// WriteFiles asks the driver to write Files, rendered for Generation, where every router
// instance reads them at start and on RELOAD (a ConfigMap, or a directory in development),
// and answer with FilesWritten{Step, Attempt, Err}.
//
// The write must be all-or-nothing (instances never see half of the files) and must never
// replace files of a newer generation: compare the generation recorded beside the files
// (the ConfigMap annotation loam.dev/router-generation) and answer with ErrNewerGeneration.
// The machine issues at most one WriteFiles at a time, but an attempt that timed out may
// still land later, and only this check keeps it from going backwards.
type WriteFiles struct {
	Step       string
	Attempt    int
	Generation uint64
	Files      render.Files
}

// Reload asks the driver to make Instance load Generation (RouterInstance.Apply: for PgDog,
// the admin command "reload", which re-reads the files written by WriteFiles) and answer
// with Reloaded{Step, Attempt, Instance, Err}. It is issued only after FilesWritten
// succeeded for Generation. Files are the same files, for adapters that place them per
// instance.
type Reload struct {
	Step       string
	Attempt    int
	Instance   string
	Generation uint64
	Files      render.Files
}

// Observe asks the driver what Instance routes by now (RouterInstance.Observe) and to answer
// with Observed{Step, Attempt, Instance, Generation, Known, Err}. It follows a successful
// Reload.
type Observe struct {
	Step       string
	Attempt    int
	Instance   string
	Generation uint64 // the generation the machine expects to see
}

// AwaitFiles asks the driver which generation of the files Instance can see where it
// reads them (on Kubernetes: the generation keys in the pod's mounted ConfigMap and
// Secret, adapters/kubernetes.VisibleGeneration) and to answer with FilesSeen{Step,
// Attempt, Instance, Generation, Err}. It is issued with Options.AwaitFiles, after
// FilesWritten succeeded and before the instance's Reload, and again after a backoff while
// the instance sees an older generation.
type AwaitFiles struct {
	Step       string
	Attempt    int
	Instance   string
	Generation uint64 // the generation the machine waits for
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At. Setting an ID
// that is pending replaces it. Timer IDs are step ids: the timer is the step's reply
// deadline or the end of its backoff.
type SetTimer struct{ machine.SetTimer }

// CancelTimer asks the driver to drop a pending timer; a TimerFired that raced it is
// ignored by the machine.
type CancelTimer struct{ machine.CancelTimer }

// Outcome reports how a push ended, for the driver to hand to whoever asked for it (log it;
// surface Stuck instances to an operator). Nothing is fed back. It is issued once per push:
// when every instance reached an end, when the files could not be written, when a newer
// generation superseded it, or at once when the Push was refused; and again after a restart
// if the last push had ended, since the first report may have died with the driver.
type Outcome struct {
	Generation uint64
	// Refused says why the Push was not accepted (empty when it was).
	Refused string
	// FilesErr is the last error of the files write when it gave up; no instance was
	// reloaded.
	FilesErr string
	// SupersededBy is the newer generation that replaced this push, or 0.
	SupersededBy uint64
	// Confirmed instances report Generation; Ahead ones report a newer generation (someone
	// pushed it already); Unknown ones reloaded but cannot say what they route by (PgDog);
	// Stuck ones failed MaxAttempts times on one step and are not waited on any longer.
	Confirmed, Ahead, Unknown, Stuck []string
}

func (WriteFiles) isCommand()  {}
func (Reload) isCommand()      {}
func (AwaitFiles) isCommand()  {}
func (Observe) isCommand()     {}
func (SetTimer) isCommand()    {}
func (CancelTimer) isCommand() {}
func (Outcome) isCommand()     {}
