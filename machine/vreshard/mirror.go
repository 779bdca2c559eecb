package vreshard

import (
	"slices"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
)

// mirrorRecord is cur with its Layout made the serving PRIMARY partition last read
// (m.s.Serving) and its Target the other side of the workflow, or nil when cur already
// says exactly that. A reason is returned when no valid record can say it.
func (m *Machine) mirrorRecord(cur *shardmap.Record) (*shardmap.Record, string) {
	st := m.s.Start
	serving := m.s.Serving
	if len(serving) == 0 {
		return nil, "vtctld lists no shard serving PRIMARY traffic for keyspace " + m.ks()
	}
	var other []string
	ending := m.s.Final == Completed || m.s.Final == Cancelled
	if !ending {
		for _, n := range append(slices.Clone(st.Source), st.Target...) {
			if !slices.Contains(serving, n) {
				other = append(other, n)
			}
		}
	}
	backend := func(name string) (shardmap.Backend, shardmap.Fence) {
		for _, l := range []*shardmap.Layout{&cur.Layout, cur.Target, &st.Record.Layout} {
			if l == nil {
				continue
			}
			for _, s := range l.Shards {
				if s.Name == name {
					return s.Backend, s.Fence
				}
			}
		}
		return st.Backends[name], shardmap.FenceOpen
	}
	scheme, _ := st.Record.Layout.Scheme.(shardmap.Vindex)
	layout := func(ns []string) (shardmap.Layout, string) {
		v := scheme
		v.Key.Tables = slices.Clone(v.Key.Tables)
		v.Ranges = nil
		l := shardmap.Layout{}
		for _, n := range ns {
			r, err := keyrange.Parse(n)
			if err != nil {
				return l, err.Error()
			}
			b, f := backend(n)
			if b.Host == "" {
				return l, "shard " + n + " serves but neither the record nor the start names its primary"
			}
			v.Ranges = append(v.Ranges, r)
			l.Shards = append(l.Shards, shardmap.Shard{Name: n, Backend: b, Fence: f})
		}
		l.Scheme = v
		return l, ""
	}
	next := cur.Clone()
	l, reason := layout(serving)
	if reason != "" {
		return nil, reason
	}
	next.Layout = l
	next.Target = nil
	if len(other) > 0 {
		t, reason := layout(other)
		if reason != "" {
			return nil, reason
		}
		next.Target = &t
	}
	same := slices.Equal(names(cur.Layout), names(next.Layout)) &&
		(cur.Target == nil) == (next.Target == nil) &&
		(cur.Target == nil || slices.Equal(names(*cur.Target), names(*next.Target)))
	phase := shardmap.Serving
	if next.Target != nil {
		phase = shardmap.Resharding
	}
	if same && cur.State.Phase == phase {
		return nil, ""
	}
	if !same {
		next.Generation = cur.Generation + 1
	}
	next.State = shardmap.State{Phase: phase}
	if phase == shardmap.Resharding {
		next.State.To = next.Generation + 1
	}
	if err := next.Validate(); err != nil {
		return nil, "the mirrored record is invalid: " + err.Error()
	}
	if err := next.ValidateNext(cur); err != nil {
		return nil, "the mirrored record cannot follow the stored one: " + err.Error()
	}
	return next, ""
}
