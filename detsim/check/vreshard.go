package check

import (
	"fmt"
	"reflect"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/kernel/shardmap"
)

// The Vitess reshard's invariants (machine/vreshard), the same code in both tiers: the
// machine's world test (machine/vreshard, world_test.go) calls them as its world applies
// each command, and the simulator's vreshard scenario as the workflow model (model.Workflows,
// through its effect hooks) and the store apply them. Before they were shared each tier had
// its own copy, and two of the world's (complete only after the check through vtgate; a
// record write always changes something) were not in the simulator at all.
const (
	// InvVReshardOnce: no step of the workflow takes effect twice (create, a VDiff, each
	// switch, complete, cancel), whatever is lost, duplicated or restarted.
	InvVReshardOnce = "vreshard-no-step-twice"
	// InvVReshardVDiff: the writes switch only after a VDiff finished with 0 mismatches.
	InvVReshardVDiff = "vreshard-vdiff-before-writes"
	// InvVReshardMirror: every record written names the PRIMARY partition vtgate serves at
	// that moment, the check through vtgate runs only while the record does, and the end
	// leaves the record mirroring Vitess.
	InvVReshardMirror = "vreshard-mirror"
	// InvVReshardHold: the workflow completes (after which no ReverseTraffic is possible)
	// only once the operator finalized the hold that follows the switch.
	InvVReshardHold = "vreshard-complete-after-finalize"
	// InvVReshardVerified: the workflow completes only after the check through vtgate
	// passed on the switched partition.
	InvVReshardVerified = "vreshard-complete-after-verify"
	// InvVReshardWriteStop: the forward switch of the writes stops them (the source
	// read-only while SwitchTraffic waits for the target to catch up) for at most MaxLagMs.
	InvVReshardWriteStop = "vreshard-write-stop"
	// InvVReshardRecordChanges: a record write changes more than the version (every write
	// bumps the version other controllers compare-and-set against).
	InvVReshardRecordChanges = "vreshard-record-changes"
)

// Reshard follows the effects of one reshard workflow. Use NewReshard.
type Reshard struct {
	maxLagMs int64
	effects  map[string]int
}

// NewReshard returns a checker for a reshard started with MaxLagMs maxLagMs.
func NewReshard(maxLagMs int64) *Reshard {
	return &Reshard{maxLagMs: maxLagMs, effects: map[string]int{}}
}

// Effect checks that step ("create", "vdiff create", "switch primary forward", "complete",
// "cancel", ...) took effect for the first time.
func (r *Reshard) Effect(now int64, step string) *detsim.Violation {
	r.effects[step]++
	if n := r.effects[step]; n > 1 {
		return &detsim.Violation{Invariant: InvVReshardOnce, T: now, Detail: fmt.Sprintf("%s took effect %d times", step, n)}
	}
	return nil
}

// Count is how many times step took effect.
func (r *Reshard) Count(step string) int { return r.effects[step] }

// Steps is how many distinct steps took effect.
func (r *Reshard) Steps() int { return len(r.effects) }

// WritesSwitched checks the forward switch of the writes as it takes effect: clean tells
// whether a VDiff finished with 0 mismatches before, stopMs how long the switch stopped the
// writes (the lag at the stop).
func (r *Reshard) WritesSwitched(now int64, clean bool, stopMs int64) *detsim.Violation {
	switch {
	case !clean:
		return &detsim.Violation{Invariant: InvVReshardVDiff, T: now, Detail: "the writes switched before a VDiff finished clean"}
	case stopMs > r.maxLagMs:
		return &detsim.Violation{Invariant: InvVReshardWriteStop, T: now,
			Detail: fmt.Sprintf("SwitchTraffic stopped the writes for %d ms (the lag at the stop), over MaxLagMs %d", stopMs, r.maxLagMs)}
	}
	return nil
}

// Completed checks the completion of the workflow as it takes effect: verified tells whether
// the check through vtgate passed, finalized whether the operator's finalize reached the
// machine.
func (r *Reshard) Completed(now int64, verified, finalized bool) *detsim.Violation {
	switch {
	case !verified:
		return &detsim.Violation{Invariant: InvVReshardVerified, T: now, Detail: "completed before the check through vtgate passed"}
	case !finalized:
		return &detsim.Violation{Invariant: InvVReshardHold, T: now,
			Detail: "completed before the operator finalized: ReverseTraffic was still owed to a rollback"}
	}
	return nil
}

// Mirror checks that the record names the shards vtgate sends writes to (live); at says
// when (a record write, the check through vtgate, the end).
func Mirror(now int64, at string, record, live []string) *detsim.Violation {
	if !slices.Equal(record, live) {
		return &detsim.Violation{Invariant: InvVReshardMirror, T: now,
			Detail: fmt.Sprintf("%s: the record has %v while vtgate sends writes to %v", at, record, live)}
	}
	return nil
}

// RecordChanges checks that next, written over cur, changes more than the version.
func RecordChanges(now int64, step string, cur, next *shardmap.Record) *detsim.Violation {
	if cur == nil || next == nil {
		return nil
	}
	same := next.Clone()
	same.Version = cur.Version
	if reflect.DeepEqual(same, cur) {
		return &detsim.Violation{Invariant: InvVReshardRecordChanges, T: now,
			Detail: fmt.Sprintf("the record write %s changes nothing but the version", step)}
	}
	return nil
}

// ShardNames is the names of a layout's shards, in order.
func ShardNames(l shardmap.Layout) []string {
	out := make([]string, len(l.Shards))
	for i, s := range l.Shards {
		out[i] = s.Name
	}
	return out
}
