package failover

import (
	"errors"
	"fmt"
	"slices"

	"loam.dev/router/machine"
)

// Snapshot is everything a Machine knows, for a driver to persist after every On and hand
// to Restore after a restart. Its JSON form is what a driver stores; the fields are not an
// API.
type Snapshot struct{ machine.Snapshot[state] }

// Snapshot returns a deep copy of the machine's state.
func (m *Machine) Snapshot() Snapshot { return Snapshot{machine.Snap(m.s)} }

// Restore rebuilds a machine from a snapshot; feed it Restarted next. A snapshot no machine
// could have produced is refused.
func Restore(s Snapshot) (*Machine, error) {
	st, err := s.State()
	if err != nil {
		return nil, fmt.Errorf("failover: restore: %w", err)
	}
	return &Machine{s: st}, nil
}

// Clone implements machine.State.
func (s state) Clone() state {
	c := s
	c.Start.Record = s.Start.Record.Clone()
	c.Start.Promoted.Replicas = slices.Clone(s.Start.Promoted.Replicas)
	c.Rec = s.Rec.Clone()
	c.Next = s.Next.Clone()
	return c
}

// Check implements machine.State.
func (s state) Check() error {
	switch {
	case s.Stage > stDone:
		return fmt.Errorf("stage %d is unknown", s.Stage)
	case s.Stage == stIdle, s.Stage == stDone:
		return nil // an ended machine only says Done again (a refused start may have no record)
	case s.Start.Record == nil || s.Rec == nil:
		return errors.New("a started failover has no record")
	case s.Stage == stRepoint && s.Sent && s.Next == nil:
		return errors.New("a record write is in flight but the record is missing")
	}
	if _, _, ok := findShard(s.Start.Record, s.Start.Shard); !ok {
		return fmt.Errorf("shard %q is not in the start record", s.Start.Shard)
	}
	return nil
}
