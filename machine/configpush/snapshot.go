package configpush

import (
	"fmt"
	"slices"
	"strings"

	"loam.dev/router/kernel/render"
)

// Snapshot is the machine's whole state. It round-trips through encoding/json, which is how
// the driver persists it after every step; Restore rebuilds a machine from it.
type Snapshot struct {
	// Database is the record's Router.Name; every push of this machine is for it.
	Database string `json:"database,omitempty"`
	// Written is the highest generation whose files were written.
	Written uint64 `json:"written,omitempty"`
	// Stray is an older push's files write that had not answered when a newer push
	// superseded it. The newer push's write waits (its step is queued) until the stray
	// answers or its deadline passes, so two writes are never in flight together.
	Stray *Stray `json:"stray,omitempty"`
	// Push is the push in progress, or the last one when Done.
	Push *Progress `json:"push,omitempty"`
}

// Stray is a files write left in flight by a superseded push.
type Stray struct {
	Generation uint64 `json:"gen"`
	Step       string `json:"step"`
	Attempt    int    `json:"attempt"`
	At         int64  `json:"at"` // its reply deadline
}

// Progress is one push.
type Progress struct {
	Generation uint64       `json:"gen"`
	Version    uint64       `json:"version"` // the record version the push was read at
	Files      render.Files `json:"files"`
	FilesStep  Step         `json:"files_step"`
	FilesErr   string       `json:"files_err,omitempty"` // set when the files step gave up
	Instances  []Instance   `json:"instances"`           // sorted by ID
	Done       bool         `json:"done,omitempty"`
}

// Instance is one router instance's progress through a push.
type Instance struct {
	ID      string `json:"id"`
	Stage   Stage  `json:"stage"`
	Visible Step   `json:"visible,omitzero"` // the AwaitFiles step (Options.AwaitFiles)
	Reload  Step   `json:"reload"`
	Observe Step   `json:"observe"`
	// Observed is the generation the instance reported (Stage ahead or confirmed, or an
	// older one that made the reload count as failed).
	Observed uint64 `json:"observed,omitempty"`
	// Failed is the stage whose step gave up, when Stage is stuck.
	Failed Stage `json:"failed,omitempty"`
}

// Stage is where an instance is in a push.
type Stage string

const (
	StageFiles     Stage = "files"     // waits for the files to be written
	StageVisible   Stage = "visible"   // its AwaitFiles step runs: it cannot see the files yet
	StageReload    Stage = "reload"    // its Reload step runs
	StageObserve   Stage = "observe"   // its Observe step runs
	StageConfirmed Stage = "confirmed" // it reports the pushed generation
	StageAhead     Stage = "ahead"     // it reports a newer generation
	StageUnknown   Stage = "unknown"   // it reloaded but cannot say what it routes by
	StageStuck     Stage = "stuck"     // a step failed too often; reported, not waited on
)

// Terminal reports whether the stage is an end of the push for the instance.
func (s Stage) Terminal() bool {
	switch s {
	case StageConfirmed, StageAhead, StageUnknown, StageStuck:
		return true
	}
	return false
}

// Step is the progress of one retried step.
type Step struct {
	State   StepState `json:"state,omitempty"`
	Attempt int       `json:"attempt,omitempty"` // the attempt issued last
	Limit   int       `json:"limit,omitempty"`   // the attempt after which the step gives up
	At      int64     `json:"at,omitempty"`      // reply deadline (awaiting) or retry time (backoff)
	Err     string    `json:"err,omitempty"`     // the last failure
}

// StepState is what a step waits for.
type StepState string

const (
	StepIdle     StepState = ""         // not started
	StepAwaiting StepState = "awaiting" // a command is out; At is its deadline
	StepBackoff  StepState = "backoff"  // failed; At is when it is tried again
	StepQueued   StepState = "queued"   // the files write waits for a stray write to answer
	StepDone     StepState = "done"
)

// Snapshot returns a copy of the machine's state. Files are shared, not copied: they are
// never modified once pushed.
func (m *Machine) Snapshot() Snapshot {
	s := m.s
	if s.Stray != nil {
		st := *s.Stray
		s.Stray = &st
	}
	if s.Push != nil {
		p := *s.Push
		p.Instances = slices.Clone(p.Instances)
		s.Push = &p
	}
	return s
}

// Restore rebuilds a machine from a snapshot, with opts (options are not persisted). Feed it
// Restarted before anything else, so what was in flight is issued again.
func Restore(s Snapshot, opts Options) (*Machine, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("configpush: cannot restore: %w", err)
	}
	m := New(opts)
	m.s = s
	if s.Push != nil {
		p := *s.Push
		p.Instances = slices.Clone(p.Instances)
		m.s.Push = &p
	}
	if s.Stray != nil {
		st := *s.Stray
		m.s.Stray = &st
	}
	return m, nil
}

func (s Snapshot) check() error {
	p := s.Push
	if p == nil {
		if s.Stray != nil {
			return fmt.Errorf("stray write of generation %d without a push", s.Stray.Generation)
		}
		return nil
	}
	if p.Generation == 0 {
		return fmt.Errorf("push.gen is 0")
	}
	if s.Stray != nil && s.Stray.Generation >= p.Generation {
		return fmt.Errorf("stray write of generation %d is not older than the push of %d", s.Stray.Generation, p.Generation)
	}
	if (p.FilesStep.State == StepQueued) != (s.Stray != nil && !p.Done) {
		return fmt.Errorf("push.files_step is %q but stray is %v", p.FilesStep.State, s.Stray != nil)
	}
	if !slices.IsSortedFunc(p.Instances, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) }) {
		return fmt.Errorf("push.instances are not sorted by id")
	}
	for i, in := range p.Instances {
		if i > 0 && p.Instances[i-1].ID == in.ID {
			return fmt.Errorf("push.instances[%d]: id %q appears twice", i, in.ID)
		}
		switch in.Stage {
		case StageFiles, StageVisible, StageReload, StageObserve, StageConfirmed, StageAhead, StageUnknown, StageStuck:
		default:
			return fmt.Errorf("push.instances[%d] (%s): unknown stage %q", i, in.ID, in.Stage)
		}
	}
	return nil
}
