package machine

import "encoding/json"

// State is a machine's state as a Snapshot holds it: Clone is a deep copy (the snapshot
// and the machine never share a slice or a record), Check refuses a state no machine could
// have reached (a corrupt or hand-edited snapshot), so a restored machine never indexes out
// of range or dereferences a missing record.
type State[S any] interface {
	Clone() S
	Check() error
}

// Snapshot is everything a machine knows, for its driver to persist before executing what a
// step asked for and to restore after a restart: the machines whose whole state is one
// value (cutover, failover, vreshard) embed it in their own Snapshot type. Its JSON form is
// the state's, which is what a driver stores; the fields are not an API.
type Snapshot[S State[S]] struct{ s S }

// Snap takes a snapshot of a machine's state (a deep copy).
func Snap[S State[S]](s S) Snapshot[S] { return Snapshot[S]{s.Clone()} }

// State is the state to restore a machine from: a deep copy, or Check's error.
func (s Snapshot[S]) State() (S, error) {
	if err := s.s.Check(); err != nil {
		var zero S
		return zero, err
	}
	return s.s.Clone(), nil
}

// MarshalJSON encodes the state; records are in shardmap's strict JSON form.
func (s Snapshot[S]) MarshalJSON() ([]byte, error) { return json.Marshal(s.s) }

// UnmarshalJSON decodes what MarshalJSON wrote.
func (s *Snapshot[S]) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &s.s) }
