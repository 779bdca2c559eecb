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
// executor makes it. It keeps what a checker needs: how often each step took effect, and
// whether the writes switched before a clean VDiff.
//
// What is simplified: the copy takes CopyPolls status reads; a VDiff completes on its
// second show, clean; no rows are modelled (the traffic scenarios check rows).
type Workflows struct {
	Node           detsim.NodeID
	Keyspace       string
	Source, Target []string
	CopyPolls      int

	exists, completed, cancelled bool
	reads, writes                bool
	polls                        int
	vdiffs                       map[string]int
	clean                        bool
	// Effects counts the steps that took effect ("create", "switch primary forward", ...).
	Effects map[string]int
	// EarlyWrites is set when the writes switched before any VDiff finished clean.
	EarlyWrites bool
}

// NewWorkflows adds vtctld's node for keyspace, resharding source into target.
func NewWorkflows(s *detsim.Sim, name, keyspace string, source, target []string) *Workflows {
	w := &Workflows{Keyspace: keyspace, Source: slices.Clone(source), Target: slices.Clone(target), CopyPolls: 2,
		vdiffs: map[string]int{}, Effects: map[string]int{}}
	if s != nil {
		w.Node = s.Net.AddNode(name)
	}
	return w
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

// Completed reports whether the workflow was completed.
func (w *Workflows) Completed() bool { return w.completed }

// Create creates the workflow unless it exists (or existed and ended).
func (w *Workflows) Create() {
	if !w.exists && !w.completed && !w.cancelled {
		w.exists = true
		w.Effects["create"]++
	}
}

// Status is the copy's progress: copying for the first CopyPolls reads.
func (w *Workflows) Status() (copying bool, err error) {
	if !w.exists {
		return false, w.notFound()
	}
	w.polls++
	return w.polls <= w.CopyPolls, nil
}

// VDiff creates VDiff uuid when new, else shows it: done (clean) on its second show.
func (w *Workflows) VDiff(uuid string) (done bool, err error) {
	if !w.exists {
		return false, w.notFound()
	}
	if _, ok := w.vdiffs[uuid]; !ok {
		w.Effects["vdiff create"]++
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
		if t == "primary" && !reverse && !w.clean {
			w.EarlyWrites = true
		}
		*on = !reverse
		dir := "forward"
		if reverse {
			dir = "reverse"
		}
		w.Effects["switch "+t+" "+dir]++
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
	w.Effects["complete"]++
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
	w.Effects["cancel"]++
	return nil
}
