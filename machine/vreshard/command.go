package vreshard

import (
	"strconv"
	"strings"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Command is what the machine asks the driver to do. At most one is in flight (besides
// Alert and Done, which are not answered); the driver persists Snapshot() before executing
// it. Step ids are "<keyspace>/<workflow>/<stage>" (a mirror's also carries the version it
// expects), so a command sent again after a restart keeps its id. Attempt counts the sends
// of one step from 1 and is echoed by the answer.
type Command interface {
	isCommand()
	String() string
}

// Inspect asks for the pre-flight facts of Keyspace (Facts). Answer with Inspected.
type Inspect struct {
	Step           string
	Attempt        int
	Keyspace, Cell string
	Source, Target []string
}

// ReadServing asks for Keyspace's serving partitions in Cell (GetSrvKeyspaces). Answer
// with Serving.
type ReadServing struct {
	Step     string
	Attempt  int
	Keyspace string
	Cell     string
}

// WriteRecord asks for a compare-and-set of Record, expecting stored version Expect.
// Answer with RecordWritten.
type WriteRecord struct {
	Step    string
	Attempt int
	Expect  uint64
	Record  *shardmap.Record
}

// Create asks for workflow Workflow resharding Source into Target (ReshardCreate, cells
// Cell, tablet types primary,replica,rdonly). Answer with Reply; a workflow of that name
// that already exists with the same shards is success (the create was already done).
type Create struct {
	Step                     string
	Attempt                  int
	Keyspace, Workflow, Cell string
	Source, Target           []string
}

// Status asks how the workflow's copy stands (WorkflowStatus). Answer with Progress.
type Status struct {
	Step               string
	Attempt            int
	Keyspace, Workflow string
}

// VDiff asks for the VDiff UUID of the workflow: created when it does not exist yet, then
// shown. Answer with Diffed (Done false while it runs).
type VDiff struct {
	Step               string
	Attempt            int
	Keyspace, Workflow string
	UUID               string
}

// Switch asks that the traffic of Types be served by the target shards (Reverse false) or
// by the source shards again (Reverse true): WorkflowSwitchTraffic with direction forward
// or backward, reverse replication on. Answer with Reply; Types already switched that way
// is success.
type Switch struct {
	Step               string
	Attempt            int
	Keyspace, Workflow string
	Types              []string // "primary", "replica", "rdonly"
	Reverse            bool
}

// Verify asks the driver to check through vtgate that the keyspace serves from Shards
// (rows read through vtgate are all there, each on the shard its key routes to). Answer
// with Reply; an Err that is Permanent means the check failed (the machine reverses), any
// other is retried.
type Verify struct {
	Step     string
	Attempt  int
	Keyspace string
	Shards   []string
}

// Complete asks for the workflow to be completed (Reshard complete): the source shards
// stop serving for good and the streams go. Answer with Reply; a workflow already gone
// after a complete is success.
type Complete struct {
	Step               string
	Attempt            int
	Keyspace, Workflow string
}

// Cancel asks for the workflow to be cancelled (Reshard cancel: streams deleted, the
// target shards' data kept). Answer with Reply; a workflow already gone is success.
type Cancel struct {
	Step               string
	Attempt            int
	Keyspace, Workflow string
}

// Alert asks for an operator's attention; nothing is answered.
type Alert struct{ Step, Reason string }

// Done reports the end; later inputs are ignored. Generation is the record's.
type Done struct {
	Outcome    Outcome
	Generation uint64
	Reason     string
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At.
type SetTimer struct{ machine.SetTimer }

// Outcome is how a reshard ended.
type Outcome uint8

const (
	// Completed: the target shards serve every tablet type and the workflow is complete.
	Completed Outcome = iota + 1
	// Cancelled: the workflow was cancelled before the writes switched; the source
	// shards serve.
	Cancelled
	// Reversed: the traffic went back to the source shards after the writes switched; the
	// workflow stays, reverse replication running.
	Reversed
	// Refused: the pre-flight found problems (Reason lists them); nothing was done.
	Refused
	// Failed: a step was refused for good or the record moved away; Reason says what to do.
	Failed
)

var outcomeNames = []string{Completed: "completed", Cancelled: "cancelled", Reversed: "reversed", Refused: "refused", Failed: "failed"}

func (o Outcome) String() string {
	if o != 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

func (Inspect) isCommand()     {}
func (ReadServing) isCommand() {}
func (WriteRecord) isCommand() {}
func (Create) isCommand()      {}
func (Status) isCommand()      {}
func (VDiff) isCommand()       {}
func (Switch) isCommand()      {}
func (Verify) isCommand()      {}
func (Complete) isCommand()    {}
func (Cancel) isCommand()      {}
func (Alert) isCommand()       {}
func (Done) isCommand()        {}
func (SetTimer) isCommand()    {}

func list(s []string) string { return strings.Join(s, ",") }

func (c Inspect) String() string {
	return "Inspect step=" + c.Step + " source=" + list(c.Source) + " target=" + list(c.Target)
}
func (c ReadServing) String() string { return "ReadServing step=" + c.Step + " cell=" + c.Cell }
func (c WriteRecord) String() string {
	s := "WriteRecord step=" + c.Step + " expect=" + strconv.FormatUint(c.Expect, 10) + " gen=" + strconv.FormatUint(c.Record.Generation, 10) +
		" layout=" + list(names(c.Record.Layout))
	if c.Record.Target != nil {
		s += " target=" + list(names(*c.Record.Target))
	}
	return s + " phase=" + c.Record.State.Phase.String()
}
func (c Create) String() string {
	return "Create step=" + c.Step + " source=" + list(c.Source) + " target=" + list(c.Target)
}
func (c Status) String() string { return "Status step=" + c.Step }
func (c VDiff) String() string  { return "VDiff step=" + c.Step + " uuid=" + c.UUID }
func (c Switch) String() string {
	return "Switch step=" + c.Step + " types=" + list(c.Types) + " reverse=" + strconv.FormatBool(c.Reverse)
}
func (c Verify) String() string   { return "Verify step=" + c.Step + " shards=" + list(c.Shards) }
func (c Complete) String() string { return "Complete step=" + c.Step }
func (c Cancel) String() string   { return "Cancel step=" + c.Step }
func (c Alert) String() string    { return "Alert step=" + c.Step + " reason=" + c.Reason }
func (c Done) String() string {
	s := "Done outcome=" + c.Outcome.String() + " gen=" + strconv.FormatUint(c.Generation, 10)
	if c.Reason != "" {
		s += " reason=" + c.Reason
	}
	return s
}
func (c SetTimer) String() string {
	return "SetTimer id=" + c.ID + " at=" + strconv.FormatInt(c.At, 10)
}

func names(l shardmap.Layout) []string {
	out := make([]string, len(l.Shards))
	for i, s := range l.Shards {
		out[i] = s.Name
	}
	return out
}
