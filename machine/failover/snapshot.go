package failover

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Snapshot is everything a Machine knows, for a driver to persist after every On and hand
// to Restore after a restart. Its JSON form is what a driver stores; the fields are not an
// API.
type Snapshot struct{ s state }

// Snapshot returns a deep copy of the machine's state.
func (m *Machine) Snapshot() Snapshot { return Snapshot{m.s.clone()} }

// Restore rebuilds a machine from a snapshot; feed it Restarted next. A snapshot no machine
// could have produced is refused.
func Restore(s Snapshot) (*Machine, error) {
	if err := s.s.check(); err != nil {
		return nil, fmt.Errorf("failover: restore: %w", err)
	}
	return &Machine{s: s.s.clone()}, nil
}

// MarshalJSON encodes the snapshot; records are in shardmap's strict JSON form.
func (s Snapshot) MarshalJSON() ([]byte, error) { return json.Marshal(s.s) }

// UnmarshalJSON decodes what MarshalJSON wrote.
func (s *Snapshot) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &s.s) }

func (s *state) clone() state {
	c := *s
	c.Start.Record = s.Start.Record.Clone()
	c.Start.Promoted.Replicas = slices.Clone(s.Start.Promoted.Replicas)
	c.Rec = s.Rec.Clone()
	c.Next = s.Next.Clone()
	return c
}

func (s *state) check() error {
	switch {
	case s.Stage > stDone:
		return fmt.Errorf("stage %d is unknown", s.Stage)
	case s.Stage == stIdle:
		return nil
	case s.Start.Record == nil || s.Rec == nil:
		return errors.New("a started failover has no record")
	case s.Stage == stDone:
		return nil
	case s.Stage == stRepoint && s.Sent && s.Next == nil:
		return errors.New("a record write is in flight but the record is missing")
	}
	if _, _, ok := findShard(s.Start.Record, s.Start.Shard); !ok {
		return fmt.Errorf("shard %q is not in the start record", s.Start.Shard)
	}
	return nil
}
