package check

import (
	"fmt"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

// ListAppend checks the list-append workload against the rows the database serves at the
// end (final(key)), after faults healed:
//
//   - no-lost-ack: every append of an acknowledged transaction is in its key's final list.
//   - no-phantom: no append of a definitely failed transaction is in a final list or a read.
//   - list-append-si: every value appears at most once in a final list; every read of an
//     acknowledged transaction is a prefix of its key's final list (lists only grow, and
//     one side serves at a time, so a read that is not a prefix saw a history that was
//     later lost or forked); and no read misses an append acknowledged before the read
//     was sent (a stale read: the fence makes an instance that missed the cutover fail,
//     never answer from the old shards).
//
// Unknown and pending operations may or may not appear: both are fine.
func ListAppend(h *History, final func(key string) []int64) *detsim.Violation {
	type ack struct {
		val int64
		at  int64
		op  *Op
	}
	acked := map[string][]ack{}
	for _, o := range h.Ops {
		if o.Kind != "txn" {
			continue
		}
		for _, op := range o.Txn.Ops {
			if op.Kind != model.OpAppend {
				continue
			}
			f := final(op.Key)
			switch o.Outcome {
			case OK:
				if !slices.Contains(f, op.Value) {
					return &detsim.Violation{Invariant: "no-lost-ack", T: o.Complete,
						Detail: fmt.Sprintf("%s: append %d to %s was acknowledged but the final list is %v", o, op.Value, op.Key, f)}
				}
				acked[op.Key] = append(acked[op.Key], ack{op.Value, o.Complete, o})
			case Failed:
				if slices.Contains(f, op.Value) {
					return &detsim.Violation{Invariant: "no-phantom", T: o.Complete,
						Detail: fmt.Sprintf("%s: append %d to %s failed definitely but is in the final list %v", o, op.Value, op.Key, f)}
				}
			}
		}
	}
	failedVals := map[int64]*Op{}
	for _, o := range h.Ops {
		if o.Kind == "txn" && o.Outcome == Failed {
			for _, op := range o.Txn.Ops {
				if op.Kind == model.OpAppend {
					failedVals[op.Value] = o
				}
			}
		}
	}
	seenKeys := map[string]bool{}
	for _, o := range h.Ops {
		if o.Kind != "txn" {
			continue
		}
		for _, op := range o.Txn.Ops {
			if seenKeys[op.Key] {
				continue
			}
			seenKeys[op.Key] = true
			f := final(op.Key)
			dup := map[int64]bool{}
			for _, v := range f {
				if dup[v] {
					return &detsim.Violation{Invariant: "list-append-si", T: 0,
						Detail: fmt.Sprintf("value %d appears twice in the final list of %s: %v", v, op.Key, f)}
				}
				dup[v] = true
			}
		}
		if o.Outcome != OK {
			continue
		}
		ri := 0
		for _, op := range o.Txn.Ops {
			if op.Kind != model.OpRead {
				continue
			}
			read := o.Reads[ri]
			ri++
			f := final(op.Key)
			if len(read) > len(f) || !slices.Equal(read, f[:len(read)]) {
				return &detsim.Violation{Invariant: "list-append-si", T: o.Complete,
					Detail: fmt.Sprintf("%s: read of %s saw %v, which is not a prefix of the final list %v", o, op.Key, read, f)}
			}
			for _, v := range read {
				if bad, ok := failedVals[v]; ok {
					return &detsim.Violation{Invariant: "no-phantom", T: o.Complete,
						Detail: fmt.Sprintf("%s: read of %s saw %d, appended by %s which failed definitely", o, op.Key, v, bad)}
				}
			}
			for _, a := range acked[op.Key] {
				if a.at < o.Invoke && !slices.Contains(read, a.val) {
					return &detsim.Violation{Invariant: "list-append-si", T: o.Complete,
						Detail: fmt.Sprintf("stale read: %s saw %v of %s, without %d acknowledged at t=%d by %s", o, read, op.Key, a.val, a.at, a.op)}
				}
			}
		}
	}
	return nil
}
