package cutover

import (
	"errors"
	"fmt"

	"loam.dev/router/machine"
)

// Check refuses states no machine can be in, so a restored machine never indexes out of
// range or dereferences a missing record (machine.State).
func (s state) Check() error {
	if int(s.Stage) >= len(stageNames) {
		return fmt.Errorf("stage %d is unknown", s.Stage)
	}
	if s.Stage == stIdle {
		return nil
	}
	if s.Origin == nil || s.Rec == nil {
		return errors.New("a started cutover has no record")
	}
	if s.Stage == stDone {
		return nil
	}
	if s.Origin.Target == nil {
		return errors.New("the start record has no target")
	}
	open := 0
	for i, o := range s.Ops {
		if o.Kind < kRecord || o.Kind > kCheck || o.State < opSent || o.State > opFailed {
			return fmt.Errorf("ops[%d] has kind %d state %d", i, o.Kind, o.State)
		}
		if o.Kind == kRecord && s.Next == nil {
			return fmt.Errorf("ops[%d] writes a record that is missing", i)
		}
		if o.Kind == kFence || o.Kind == kUnfence {
			l := s.Origin.Layout
			if o.Side == sideTarget {
				l = *s.Origin.Target
			}
			if o.Index < 0 || o.Index >= len(l.Shards) || l.Shards[o.Index].Name != o.Target {
				return fmt.Errorf("ops[%d] names shard %q at %d, which the layout does not have", i, o.Target, o.Index)
			}
		}
		if o.State == opSent || o.State == opWaiting {
			open++
		}
	}
	if open != s.Open {
		return fmt.Errorf("%d ops are open but the count says %d", open, s.Open)
	}
	return nil
}

// Snapshot is everything a Machine knows, for a driver to persist after every On and to
// hand to Restore after a restart. Its JSON form (machine.Snapshot's MarshalJSON) is what a driver stores; the
// fields are not an API.
type Snapshot struct{ machine.Snapshot[state] }

// Snapshot returns a deep copy of the machine's state.
func (m *Machine) Snapshot() Snapshot { return Snapshot{machine.Snap(m.s)} }

// Restore rebuilds a machine from a snapshot. Feed it Restarted next, so it sends again
// what was in flight when the snapshot was taken. A snapshot that could not have come from
// Snapshot (a corrupt or hand-edited one) is refused, never half-trusted.
func Restore(s Snapshot) (*Machine, error) {
	st, err := s.State()
	if err != nil {
		return nil, fmt.Errorf("cutover: restore: %w", err)
	}
	return &Machine{s: st}, nil
}
