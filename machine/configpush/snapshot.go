package configpush

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
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
	Generation uint64 `json:"gen"`
	Version    uint64 `json:"version"` // the record version the push was read at
	// Files are the push's files. They are never persisted: users.toml carries every
	// password, and a snapshot in the store must not. Digest is persisted instead, and a
	// restored machine gets its files back from RestoreWithFiles, rendered again from the
	// record and the secrets, only if they match it.
	Files     render.Files `json:"-"`
	Digest    string       `json:"digest"`
	FilesStep Step         `json:"files_step"`
	FilesErr  string       `json:"files_err,omitempty"` // set when the files step gave up
	Instances []Instance   `json:"instances"`           // sorted by ID
	Done      bool         `json:"done,omitempty"`
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
	// From is the last attempt of an earlier push of the same generation with other files
	// (a rotated password): replies to attempts up to From are about those files and are
	// not taken.
	From int `json:"from,omitempty"`
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

// ErrFilesChanged is in the Outcome of a restored push whose files, rendered again, do not
// match the digest its snapshot kept.
var ErrFilesChanged = errors.New("configpush: the files rendered again do not match the snapshot's digest")

// Restore rebuilds a machine from a snapshot, with opts (options are not persisted). Feed it
// Restarted before anything else, so what was in flight is issued again.
//
// A snapshot decoded from JSON carries no files (see Progress.Files): use RestoreWithFiles to
// give them back. Restored without them, an unfinished push ends with a files error and
// nothing is written or reloaded; the next Push of its generation starts it again.
func Restore(s Snapshot, opts Options) (*Machine, error) {
	return restore(s, nil, nil, opts)
}

// RestoreWithFiles is Restore with the files of the push rendered again by the driver: rec
// is the record in the store now and files are its files rendered with the secrets of now.
// The snapshot must be one rec can have followed: for rec's database, and no generation in
// it above rec's (else an error: the snapshot was not written by a controller of this
// record). The files are taken only if rec is at the push's generation and they match the
// digest the snapshot kept; otherwise an unfinished push ends with ErrFilesChanged in its
// Outcome (a password rotated since, or a snapshot written by someone else), nothing of it
// is written, and the next Push starts the generation again with the files of now.
func RestoreWithFiles(s Snapshot, rec *shardmap.Record, files render.Files, opts Options) (*Machine, error) {
	if rec == nil {
		return nil, fmt.Errorf("configpush: cannot restore: no record to render the files from")
	}
	return restore(s, rec, files, opts)
}

func restore(s Snapshot, rec *shardmap.Record, files render.Files, opts Options) (*Machine, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("configpush: cannot restore: %w", err)
	}
	if rec != nil {
		if err := s.follows(rec); err != nil {
			return nil, fmt.Errorf("configpush: cannot restore: %w", err)
		}
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
	if pr := m.s.Push; pr != nil && pr.Files == nil {
		switch {
		case rec != nil && rec.Generation == pr.Generation && files.Digest() == pr.Digest:
			pr.Files = files
		case !pr.Done:
			why := "restored without its files"
			if rec != nil {
				why = fmt.Sprintf("%v (generation %d, digest %s; rendered now from record version %d generation %d: %s): the record or a password changed since, or the snapshot was not written by this controller; nothing of it is written",
					ErrFilesChanged, pr.Generation, pr.Digest, rec.Version, rec.Generation, files.Digest())
			}
			m.halt(pr, why)
		}
	}
	return m, nil
}

// halt ends a restored push whose files are not known, before anything of it is issued
// again: Restarted reports its Outcome, with why as the files error.
func (m *Machine) halt(pr *Progress, why string) {
	if st := pr.FilesStep; st.State == StepAwaiting && m.s.Stray == nil {
		// The old driver's write may still land: the next write waits for its deadline.
		m.s.Stray = &Stray{Generation: pr.Generation, Step: filesStep(pr.Generation), Attempt: st.Attempt, At: st.At}
	}
	pr.Done = true
	pr.FilesErr = why
	pr.FilesStep.From = pr.FilesStep.Attempt
	if pr.FilesStep.State != StepDone {
		pr.FilesStep.State, pr.FilesStep.Err = StepDone, why
	}
	for i := range pr.Instances {
		if in := &pr.Instances[i]; !in.Stage.Terminal() {
			// Back to waiting for the files: a Push that brings them starts the instance
			// again, its attempts going on from here.
			in.Stage = StageFiles
			in.Reload = Step{Attempt: in.Reload.Attempt, From: in.Reload.Attempt}
			in.Observe = Step{Attempt: in.Observe.Attempt, From: in.Observe.Attempt}
			in.Visible = Step{Attempt: in.Visible.Attempt, From: in.Visible.Attempt}
		}
	}
}

// follows checks the snapshot against the record in the store: a controller never pushes
// or writes a generation the store has not published.
func (s Snapshot) follows(rec *shardmap.Record) error {
	if s.Database != "" && s.Database != rec.Router.Name {
		return fmt.Errorf("the snapshot is for database %q but the record is %q", s.Database, rec.Router.Name)
	}
	if s.Written > rec.Generation {
		return fmt.Errorf("written is generation %d, above the record's generation %d: the store never published it", s.Written, rec.Generation)
	}
	if p := s.Push; p != nil && p.Generation > rec.Generation {
		return fmt.Errorf("push.gen is %d, above the record's generation %d: the store never published it", p.Generation, rec.Generation)
	}
	return nil
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
	if s.Stray != nil && (s.Stray.Generation > p.Generation || s.Stray.Generation == p.Generation && s.Stray.Attempt > p.FilesStep.From) {
		return fmt.Errorf("stray write of generation %d (attempt %d) is not older than the push of %d", s.Stray.Generation, s.Stray.Attempt, p.Generation)
	}
	if p.FilesStep.From > p.FilesStep.Attempt && p.FilesStep.State != StepQueued {
		return fmt.Errorf("push.files_step.from %d is above its attempt %d", p.FilesStep.From, p.FilesStep.Attempt)
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
