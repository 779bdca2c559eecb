package cutover

import "encoding/json"

// Snapshot is everything a Machine knows, for a driver to persist after every On and to
// hand to Restore after a restart. Its JSON form (MarshalJSON) is what a driver stores; the
// fields are not an API.
type Snapshot struct{ s state }

// Snapshot returns a deep copy of the machine's state.
func (m *Machine) Snapshot() Snapshot { return Snapshot{m.s.clone()} }

// Restore rebuilds a machine from a snapshot. Feed it Restarted next, so it sends again
// what was in flight when the snapshot was taken.
func Restore(s Snapshot) *Machine { return &Machine{s: s.s.clone()} }

// MarshalJSON encodes the snapshot; records are in shardmap's strict JSON form.
func (s Snapshot) MarshalJSON() ([]byte, error) { return json.Marshal(s.s) }

// UnmarshalJSON decodes what MarshalJSON wrote.
func (s *Snapshot) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &s.s) }
