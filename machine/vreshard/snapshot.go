package vreshard

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"loam.dev/router/machine"
)

// Snapshot is everything a Machine knows, for a driver to persist before executing what a
// step asked for and to hand to Restore after a restart. Its JSON form is what a driver
// stores; the fields are not an API.
type Snapshot struct{ machine.Snapshot[state] }

// Snapshot returns a deep copy of the machine's state.
func (m *Machine) Snapshot() Snapshot { return Snapshot{machine.Snap(m.s)} }

// Restore rebuilds a machine from a snapshot; feed it Restarted next. A snapshot no machine
// could have produced is refused.
func Restore(s Snapshot) (*Machine, error) {
	st, err := s.State()
	if err != nil {
		return nil, fmt.Errorf("vreshard: restore: %w", err)
	}
	return &Machine{s: st}, nil
}

// Clone implements machine.State.
func (s state) Clone() state {
	c := s
	c.Start.Record = s.Start.Record.Clone()
	c.Start.Source, c.Start.Target = slices.Clone(s.Start.Source), slices.Clone(s.Start.Target)
	c.Start.Backends = maps.Clone(s.Start.Backends)
	c.Rec, c.Next = s.Rec.Clone(), s.Next.Clone()
	c.Serving = slices.Clone(s.Serving)
	return c
}

// Check implements machine.State.
func (s state) Check() error {
	switch {
	case s.Stage >= stageCount || s.After >= stageCount:
		return fmt.Errorf("stage %d is unknown", s.Stage)
	case s.Stage == stIdle, s.Stage == stDone && s.Outcome == Refused:
		return nil // a refused Start may have had no record, and keeps none
	case s.Start.Record == nil || s.Rec == nil:
		return errors.New("a started reshard has no record")
	case s.Stage == stDone:
		return nil
	case s.Stage == stWrite && s.Next == nil:
		return errors.New("a record write is in flight but the record is missing")
	case s.Stage == stVDiff && s.UUID == "" && !s.Start.Options.Mutants.SkipVDiff:
		return errors.New("a VDiff is in flight without its id")
	}
	if checkStart(s.Start) != "" {
		return errors.New("the start request is invalid: " + checkStart(s.Start))
	}
	return nil
}
