package model

import (
	"fmt"
	"slices"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/kernel/keyrange"
)

// Workflows is vtctld's Reshard workflow of one keyspace as machine/vreshard sees it
// through driver.VReshardExecutor: the shards serving primary and replica traffic, the
// workflow's life (copy, VDiffs, switches, complete, cancel), each call idempotent as the
// executor makes it. It tells a checker (check.Reshard) of every effect through OnEffect
// and OnWritesSwitched.
//
// What is simplified: the copy takes CopyPolls status reads; a VDiff completes on its
// second show, clean; no rows are modelled (the traffic scenarios check rows). The lag is
// Backlog when the copy ends, falling by Drain ms per second of the simulated clock to a
// floor of 100 ms; the forward switch of the writes stops them (the source read-only until
// the target has applied what it lags by) for the lag at that moment, and is refused over
// max_replication_lag_allowed (30 s, as the adapter sends it).
type Workflows struct {
	Node           detsim.NodeID
	Keyspace       string
	Source, Target []string
	CopyPolls      int
	// Backlog and Drain are heavy writes: the streams' lag when the copy ends, ms, and how
	// many ms of it the target catches up per second. Zero Backlog: a lag of 100 ms.
	Backlog, Drain int64
	// OnEffect, when set, is called with each step as it takes effect ("create", "vdiff
	// create", "switch primary forward", "complete", "cancel", ...).
	OnEffect func(step string)
	// OnWritesSwitched, when set, is called as the forward switch of the writes takes
	// effect: clean tells whether a VDiff finished clean before, stopMs how long the switch
	// stopped the writes (the lag at that moment).
	OnWritesSwitched func(clean bool, stopMs int64)

	now     func() int64
	copyEnd int64 // when a Status first said the copy was done (-1 before)

	exists, completed, cancelled bool
	reads, writes                bool
	polls                        int
	vdiffs                       map[string]int
	clean                        bool
}

// NewWorkflows adds vtctld's node for keyspace, resharding source into target.
func NewWorkflows(s *detsim.Sim, name, keyspace string, source, target []string) *Workflows {
	w := &Workflows{Keyspace: keyspace, Source: slices.Clone(source), Target: slices.Clone(target), CopyPolls: 2,
		vdiffs: map[string]int{}, copyEnd: -1, now: func() int64 { return 0 }}
	if s != nil {
		w.Node = s.Net.AddNode(name)
		w.now = s.Now
	}
	return w
}

// MaxLagAllowed is the max_replication_lag_allowed the adapter sends SwitchTraffic, ms.
const MaxLagAllowed = 30_000

// Lag is the streams' replication lag now, ms.
func (w *Workflows) Lag() int64 {
	if w.writes || w.Backlog <= 0 || w.copyEnd < 0 {
		return 100
	}
	return max(100, w.Backlog-w.Drain*(w.now()-w.copyEnd)/1000)
}

func (w *Workflows) notFound() error {
	return &adapters.VitessError{Op: "GetWorkflows", Keyspace: w.Keyspace, Code: "Unknown", Err: fmt.Errorf("%w: no workflow", adapters.ErrNotFound)}
}

// Primary is the PRIMARY partition: the shards vtgate sends writes to.
func (w *Workflows) Primary() []string {
	if w.writes {
		return slices.Clone(w.Target)
	}
	return slices.Clone(w.Source)
}

// Srv is the PRIMARY partition with its ranges.
func (w *Workflows) Srv() []adapters.SrvShard {
	var out []adapters.SrvShard
	for _, n := range w.Primary() {
		out = append(out, adapters.SrvShard{Name: n, Range: keyrange.MustParse(n)})
	}
	return out
}

func (w *Workflows) effect(step string) {
	if w.OnEffect != nil {
		w.OnEffect(step)
	}
}

// Completed reports whether the workflow was completed.
func (w *Workflows) Completed() bool { return w.completed }

// Create creates the workflow unless it exists (or existed and ended).
func (w *Workflows) Create() {
	if !w.exists && !w.completed && !w.cancelled {
		w.exists = true
		w.effect("create")
	}
}

// Status is the copy's progress: copying for the first CopyPolls reads, then the lag.
func (w *Workflows) Status() (copying bool, lag int64, err error) {
	if !w.exists {
		return false, 0, w.notFound()
	}
	w.polls++
	if w.polls <= w.CopyPolls {
		return true, 0, nil
	}
	if w.copyEnd < 0 {
		w.copyEnd = w.now()
	}
	return false, w.Lag(), nil
}

// VDiff creates VDiff uuid when new, else shows it: done (clean) on its second show.
func (w *Workflows) VDiff(uuid string) (done bool, err error) {
	if !w.exists {
		return false, w.notFound()
	}
	if _, ok := w.vdiffs[uuid]; !ok {
		w.effect("vdiff create")
		w.vdiffs[uuid] = 0
		return false, nil
	}
	w.vdiffs[uuid]++
	if w.vdiffs[uuid] >= 1 {
		w.clean = true
		return true, nil
	}
	return false, nil
}

// Switch serves types from the target (or, reverse, the source) unless they already are.
func (w *Workflows) Switch(types []string, reverse bool) error {
	if !w.exists {
		return w.notFound()
	}
	if lag := w.Lag(); !reverse && !w.writes && slices.Contains(types, "primary") && lag > MaxLagAllowed {
		return &adapters.VitessError{Op: "WorkflowSwitchTraffic", Keyspace: w.Keyspace, Code: "Unknown",
			Err: fmt.Errorf("replication lag %d ms is higher than allowed lag %d ms", lag, MaxLagAllowed)}
	}
	for _, t := range types {
		on := &w.reads
		if t == "primary" {
			on = &w.writes
		} else if t == "rdonly" {
			continue // one flag for replica and rdonly
		}
		if *on == !reverse {
			continue
		}
		if t == "primary" && !reverse && w.OnWritesSwitched != nil {
			w.OnWritesSwitched(w.clean, w.Lag())
		}
		*on = !reverse
		dir := "forward"
		if reverse {
			dir = "reverse"
		}
		w.effect("switch " + t + " " + dir)
	}
	return nil
}

// Complete completes the workflow; gone already is done.
func (w *Workflows) Complete() error {
	if !w.exists {
		return nil
	}
	if !w.writes || !w.reads {
		return &adapters.VitessError{Op: "MoveTablesComplete", Keyspace: w.Keyspace, Code: "Unknown", Err: fmt.Errorf("cannot complete: traffic not switched")}
	}
	w.exists, w.completed = false, true
	w.effect("complete")
	return nil
}

// Cancel deletes the workflow (writes must not be switched); gone already is done.
func (w *Workflows) Cancel() error {
	if !w.exists {
		return nil
	}
	if w.writes {
		return &adapters.VitessError{Op: "WorkflowDelete", Keyspace: w.Keyspace, Code: "Unknown", Err: fmt.Errorf("cannot cancel: writes are switched")}
	}
	w.exists, w.cancelled, w.reads = false, true, false
	w.effect("cancel")
	return nil
}
