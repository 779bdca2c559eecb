package vreshard_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/vreshard"
)

// world is Vitess (one keyspace, one workflow) and the record store as the machine sees
// them, with the invariants checked after every effect.
type world struct {
	source, target []string
	store          *shardmap.Record

	exists, completed, cancelled bool
	readsOn, writesOn            bool           // the target serves replica/rdonly, primary
	statusPolls, copyPolls       int            // Status answers so far; how many say copying
	vdiffs                       map[string]int // shows per VDiff id
	cleanVDiff                   bool           // a VDiff finished with 0 mismatches
	mismatch, verifyFail         bool
	verified                     bool
	finalized                    bool // the operator's Finalize (or finalize_after's timer) reached the machine

	lags       []int64        // the LagMs of successive Status answers, the last one repeated (none: backlog, or 100)
	lastLag    int64          // the lag the last Status answer showed
	maxLag     int64          // the start's MaxLagMs: a longer stop of the writes trips a check
	bumps      int            // identical writes of another writer to come, one before each CAS
	changes    int            // routing changes of another writer to come (a new generation), one before each CAS
	chk        *check.Reshard // the invariants, shared with the simulator's vreshard scenario
	violations []string

	// Heavy writes: backlog is the streams' lag when the copy ends, ms, falling by drain ms
	// per second of the driver's clock (the target applies faster than the source writes)
	// to the floor of 100. copyEnd is when a Status first said the copy was done (-1
	// before); now is the driver's clock; writeStop how long the forward switch of the
	// writes stopped them, ms (-1: not yet).
	backlog, drain, copyEnd, writeStop int64
	now                                func() int64
}

func newWorld(rec *shardmap.Record) *world {
	return &world{source: []string{"0"}, target: []string{"-80", "80-"}, store: rec.Clone(), vdiffs: map[string]int{}, chk: check.NewReshard(5000), copyPolls: 2, maxLag: 5000, copyEnd: -1, writeStop: -1}
}

func (w *world) clock() int64 {
	if w.now == nil {
		return 0
	}
	return w.now()
}

// lag is the streams' replication lag now: the next of lags when a Status asks (the last
// one shown otherwise), else the backlog drained since the copy ended.
func (w *world) lag() int64 {
	switch {
	case w.writesOn:
		return 100 // SwitchTraffic waited for the catch-up
	case len(w.lags) > 0:
		return w.lags[min(max(w.statusPolls, 1), len(w.lags))-1]
	case w.backlog > 0 && w.copyEnd >= 0:
		return max(100, w.backlog-w.drain*(w.clock()-w.copyEnd)/1000)
	}
	return 100
}

func (w *world) violate(format string, a ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, a...))
}

func (w *world) report(v *detsim.Violation) {
	if v != nil {
		w.violate("%s: %s", v.Invariant, v.Detail)
	}
}

// once checks an effective application of step.
func (w *world) once(step string) { w.report(w.chk.Effect(w.clock(), step)) }

// primary is the live PRIMARY partition: the shards vtgate sends writes to.
func (w *world) primary() []string {
	if w.writesOn {
		return w.target
	}
	return w.source
}

func (w *world) replica() []string {
	if w.readsOn {
		return w.target
	}
	return w.source
}

func srv(ns []string) []vreshard.SrvShard {
	var out []vreshard.SrvShard
	for _, n := range ns {
		out = append(out, vreshard.SrvShard{Name: n, Range: keyrange.MustParse(n)})
	}
	return out
}

var errWorkflow = errors.New("vtctld: workflow customer.wf not found")

// apply executes c; fail makes it answer fail, having taken effect when applied.
func (w *world) apply(c vreshard.Command, fail error, applied bool) vreshard.Input {
	effect := fail == nil || applied
	reply := func(step string, attempt int, err error) vreshard.Input {
		if fail != nil {
			err = fail
		}
		return vreshard.Reply{Step: step, Attempt: attempt, Err: err}
	}
	switch c := c.(type) {
	case vreshard.Inspect:
		f := vreshard.Facts{Sharded: true, Tables: []vreshard.TableFacts{{Name: "customer", PrimaryVindex: "hash"}, {Name: "corder", PrimaryVindex: "hash"}}}
		for _, n := range w.source {
			f.Shards = append(f.Shards, vreshard.ShardFacts{Name: n, Serving: !w.writesOn, Primary: "zone1-0000000100"})
			f.Sources = append(f.Sources, vreshard.BinlogFacts{Shard: n, Format: "ROW", Image: "FULL", GTID: true})
		}
		for i, n := range w.target {
			f.Shards = append(f.Shards, vreshard.ShardFacts{Name: n, Serving: w.writesOn, Primary: fmt.Sprintf("zone1-%010d", 200+i)})
		}
		return vreshard.Inspected{Step: c.Step, Attempt: c.Attempt, Facts: f, Err: fail}
	case vreshard.ReadServing:
		return vreshard.Serving{Step: c.Step, Attempt: c.Attempt, Primary: srv(w.primary()), Replica: srv(w.replica()), Err: fail}
	case vreshard.WriteRecord:
		if fail != nil && !applied {
			return vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: fail}
		}
		if w.bumps > 0 { // another writer stores the same content as a new version first
			w.bumps--
			w.store.Version++
		} else if w.changes > 0 { // another writer changes the routing: a new generation
			w.changes--
			w.store.Version++
			w.store.Generation++
		}
		if c.Expect != w.store.Version {
			return vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Conflict: w.store.Clone(), Err: errors.New("conflict")}
		}
		w.report(check.RecordChanges(w.clock(), c.Step, w.store, c.Record))
		w.write(c.Record)
		return vreshard.RecordWritten{Step: c.Step, Attempt: c.Attempt, Version: w.store.Version, Err: fail}
	case vreshard.Create:
		if effect && !w.exists && !w.completed && !w.cancelled {
			w.once("create")
			w.exists = true
		}
		return reply(c.Step, c.Attempt, nil)
	case vreshard.Status:
		if !w.exists {
			return vreshard.Progress{Step: c.Step, Attempt: c.Attempt, Err: errWorkflow}
		}
		w.statusPolls++
		copying := w.statusPolls <= w.copyPolls
		if !copying && w.copyEnd < 0 {
			w.copyEnd = w.clock()
		}
		w.lastLag = w.lag()
		return vreshard.Progress{Step: c.Step, Attempt: c.Attempt, Copying: copying, LagMs: w.lastLag, Rows: 1000, Err: fail}
	case vreshard.VDiff:
		if !uuidV4.MatchString(c.UUID) {
			w.violate("VDiff %s with id %q: vtctld takes only a UUID", c.Step, c.UUID)
		}
		if !w.exists {
			return vreshard.Diffed{Step: c.Step, Attempt: c.Attempt, Err: errWorkflow}
		}
		if _, ok := w.vdiffs[c.UUID]; !ok && effect {
			w.once("vdiff-create")
		}
		if !effect {
			return vreshard.Diffed{Step: c.Step, Attempt: c.Attempt, Err: fail}
		}
		w.vdiffs[c.UUID]++
		d := vreshard.Diffed{Step: c.Step, Attempt: c.Attempt, Done: w.vdiffs[c.UUID] > 1, Rows: 1000, Err: fail}
		if d.Done && w.mismatch {
			d.Mismatch = []string{"corder"}
		} else if d.Done {
			w.cleanVDiff = true
		}
		return d
	case vreshard.Switch:
		if !w.exists {
			return reply(c.Step, c.Attempt, errWorkflow)
		}
		if lag := w.lag(); slices.Contains(c.Types, "primary") && !c.Reverse && !w.writesOn && lag > maxLagAllowed {
			// Vitess checks max_replication_lag_allowed (30 s, as the adapter sends it)
			// before it stops anything.
			return reply(c.Step, c.Attempt, fmt.Errorf("vtctld: replication lag %d ms is higher than allowed lag %d ms", lag, maxLagAllowed))
		}
		if effect {
			w.switchTraffic(c)
		}
		return reply(c.Step, c.Attempt, nil)
	case vreshard.Verify:
		w.report(check.Mirror(w.clock(), "checking through vtgate", check.ShardNames(w.store.Layout), w.primary()))
		if fail != nil {
			return reply(c.Step, c.Attempt, nil)
		}
		if w.verifyFail || !slices.Equal(w.primary(), c.Shards) {
			return vreshard.Reply{Step: c.Step, Attempt: c.Attempt, Err: errors.New("vtgate: 3 rows of 1000 missing"), Permanent: true}
		}
		w.verified = true
		return reply(c.Step, c.Attempt, nil)
	case vreshard.Complete:
		if effect && w.exists {
			if !w.writesOn || !w.readsOn {
				return reply(c.Step, c.Attempt, errors.New("cannot complete: traffic not switched"))
			}
			w.report(w.chk.Completed(w.clock(), w.verified, w.finalized))
			w.once("complete")
			w.exists, w.completed = false, true
		}
		return reply(c.Step, c.Attempt, nil)
	case vreshard.Cancel:
		if effect && w.exists {
			if w.writesOn {
				return reply(c.Step, c.Attempt, errors.New("cannot cancel: writes are switched"))
			}
			w.once("cancel")
			w.exists, w.cancelled, w.readsOn = false, true, false
		}
		return reply(c.Step, c.Attempt, nil)
	}
	return nil
}

func (w *world) switchTraffic(c vreshard.Switch) {
	for _, t := range c.Types {
		on := &w.readsOn
		if t == "primary" {
			on = &w.writesOn
			if !c.Reverse && !w.writesOn {
				// The source is read-only until the target has applied what it lags by.
				w.writeStop = w.lag()
				w.report(w.chk.WritesSwitched(w.clock(), w.cleanVDiff, w.writeStop))
			}
		}
		if *on != !c.Reverse {
			*on = !c.Reverse
			dir := "forward"
			if c.Reverse {
				dir = "reverse"
			}
			w.once("switch " + t + " " + dir)
		}
	}
}

func (w *world) write(next *shardmap.Record) {
	if err := next.Validate(); err != nil {
		w.violate("invalid record written: %v", err)
	} else if err := next.ValidateNext(w.store); err != nil {
		w.violate("record refused by the store: %v", err)
	}
	w.report(check.Mirror(w.clock(), "a record write", check.ShardNames(next.Layout), w.primary()))
	r := next.Clone()
	r.Version = w.store.Version + 1
	w.store = r
}

// maxLagAllowed is the max_replication_lag_allowed the adapter sends SwitchTraffic, ms.
const maxLagAllowed = 30_000

// uuidV4 is the form of the VDiff ids the machine draws (version 4, RFC 4122 variant).
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkEnd holds the end to what the world is.
func (w *world) checkEnd(d vreshard.Done) {
	w.report(check.Mirror(w.clock(), "at the end", check.ShardNames(w.store.Layout), w.primary()))
	if d.Generation != w.store.Generation {
		w.violate("done at generation %d, the store has %d", d.Generation, w.store.Generation)
	}
	if (d.Outcome == vreshard.Completed) != (d.Reason == "") {
		w.violate("done %v with reason %q: every end but completion says why", d.Outcome, d.Reason)
	}
	switch d.Outcome {
	case vreshard.Completed:
		if !w.completed || w.store.Target != nil || w.store.State.Phase != shardmap.Serving {
			w.violate("completed but the workflow is not (completed=%v) or the record still reshards (%v)", w.completed, w.store.State.Phase)
		}
	case vreshard.Cancelled:
		if w.exists || w.writesOn || w.readsOn || w.store.Target != nil {
			w.violate("cancelled but the workflow stands (exists=%v writes=%v reads=%v)", w.exists, w.writesOn, w.readsOn)
		}
	case vreshard.Reversed:
		if w.writesOn || w.readsOn || w.store.Target == nil {
			w.violate("reversed but the target serves (writes=%v reads=%v) or the record lost the target", w.writesOn, w.readsOn)
		}
	}
}

// fixture is keyspace customer unsharded (shard "0") at generation 3, to be split in two.
func fixture() vreshard.Start {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r, err := shardmap.NewVindex("customer", key, shardmap.VindexHash, shardmap.Backend{Host: "10.0.4.1", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000100"})
	if err != nil {
		panic(err)
	}
	r.Shards[0].Name = "0"
	v := r.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	r.Layout.Scheme = v
	r.Version, r.Generation = 20, 3
	return vreshard.Start{Record: r, Workflow: "wf", Cell: "zone1", Source: []string{"0"}, Target: []string{"-80", "80-"},
		Backends: map[string]shardmap.Backend{
			"-80": {Host: "10.0.4.2", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000200"},
			"80-": {Host: "10.0.4.3", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000201"},
		},
		Options: vreshard.Options{PollEvery: 1000, RetryAfter: 100, Attempts: 2}}
}

func stepOf(c vreshard.Command) string {
	switch c := c.(type) {
	case vreshard.Inspect:
		return c.Step
	case vreshard.ReadServing:
		return c.Step
	case vreshard.WriteRecord:
		return c.Step
	case vreshard.Create:
		return c.Step
	case vreshard.Status:
		return c.Step
	case vreshard.VDiff:
		return c.Step
	case vreshard.Switch:
		return c.Step
	case vreshard.Verify:
		return c.Step
	case vreshard.Complete:
		return c.Step
	case vreshard.Cancel:
		return c.Step
	}
	return ""
}
