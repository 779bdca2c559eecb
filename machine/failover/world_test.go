package failover_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/failover"
)

// world models the store, the old primary and Vitess's topology for one failover, and
// checks the invariants after every effect.
type world struct {
	start      *shardmap.Record
	shard      string
	promoted   shardmap.Backend
	attempts   int
	store      *shardmap.Record
	fenced     bool // the old primary refuses the application
	fenceTries int
	reparented bool            // Vitess takes the promoted tablet as primary
	pushed     uint64          // generation handed to ConfigPush
	promotedAt map[uint64]bool // generations stored that name the promoted primary
	// wrongShard: the promoted tablet serves another shard, so vtctld refuses every
	// Reparent for good (adapters.ErrWrongShard, Reply.Permanent) and reparents nothing.
	wrongShard bool
	// oldDown: the old primary is down (the usual reason for a failover): every fence
	// fails and takes no effect.
	oldDown    bool
	refusals   int // Reparents answered with a permanent refusal
	alerts     []failover.Alert
	steps      map[string]string // step id -> the request it names (see checkStep)
	violations []string
}

// errWrongShard is the adapter's refusal of a tablet of another shard, as the machine sees it.
var errWrongShard = errors.New("adapters: the tablet belongs to another shard: tablet zone1-201 serves commerce/-80")

func newWorld(rec *shardmap.Record, shard string, promoted shardmap.Backend, attempts int) *world {
	return &world{start: rec.Clone(), shard: shard, promoted: promoted, attempts: attempts, store: rec.Clone(), promotedAt: map[uint64]bool{}, steps: map[string]string{}}
}

func (w *world) violate(format string, a ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, a...))
}

func backendOf(r *shardmap.Record, shard string) (shardmap.Backend, bool) {
	for _, l := range []*shardmap.Layout{&r.Layout, r.Target} {
		if l == nil {
			continue
		}
		for _, s := range l.Shards {
			if s.Name == shard {
				return s.Backend, true
			}
		}
	}
	return shardmap.Backend{}, false
}

func (w *world) apply(c failover.Command, fail error, applied bool) failover.Input {
	effect := fail == nil || applied
	switch c := c.(type) {
	case failover.FenceOld:
		w.fenceTries++
		if w.oldDown {
			return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: errors.New("dial tcp 10.0.0.1:5432: connect: connection refused")}
		}
		if effect {
			w.fenced = true
		}
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: fail}
	case failover.Reparent:
		if w.wrongShard {
			w.refusals++
			return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: errWrongShard, Permanent: true}
		}
		if effect {
			w.reparented = true
		}
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: fail}
	case failover.WriteRecord:
		if fail != nil && !applied {
			return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: fail}
		}
		if c.Expect != w.store.Version {
			if fail != nil {
				return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: fail}
			}
			return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Conflict: w.store.Clone(), Err: errors.New("conflict")}
		}
		w.write(c.Record)
		if fail != nil {
			return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Err: fail}
		}
		return failover.RecordWritten{Step: c.Step, Attempt: c.Attempt, Version: w.store.Version}
	case failover.Push:
		if effect {
			if !w.promotedAt[c.Generation] || c.Record.Generation != c.Generation {
				w.violate("pushed generation %d, which no stored record naming the promoted primary has", c.Generation)
			}
			w.pushed = c.Generation
		}
		return failover.Reply{Step: c.Step, Attempt: c.Attempt, Err: fail}
	}
	return nil
}

// checkStep checks the step ids' contract: a command sent again (after a failure or a
// restart) keeps its id, and an id names one request, since a driver takes a step id it has
// already executed for done. A rebased record write is another request, so another id.
func (w *world) checkStep(c failover.Command) {
	var step string
	var req any
	switch c := c.(type) {
	case failover.FenceOld:
		c.Attempt = 0
		step, req = c.Step, c
	case failover.Reparent:
		c.Attempt = 0
		step, req = c.Step, c
	case failover.WriteRecord:
		c.Attempt = 0
		step, req = c.Step, c
	case failover.Push:
		c.Attempt = 0
		step, req = c.Step, c
	default:
		return
	}
	b, err := json.Marshal(req)
	if err != nil {
		w.violate("%s: %v", step, err)
		return
	}
	if prev, ok := w.steps[step]; ok && prev != string(b) {
		w.violate("step %s names two requests: %s and %s", step, prev, b)
	}
	w.steps[step] = string(b)
}

// foreignBump is someone else's write that keeps this shard's backend as it is.
func (w *world) foreignBump() {
	w.store.Version++
	w.store.Generation++
	if b, _ := backendOf(w.store, w.shard); b.Host == w.promoted.Host && b.Port == w.promoted.Port {
		w.promotedAt[w.store.Generation] = true
	}
}

func (w *world) write(next *shardmap.Record) {
	if next.Generation <= w.store.Generation {
		w.violate("generation %d written over %d: generations only increase", next.Generation, w.store.Generation)
	}
	if err := next.Validate(); err != nil {
		w.violate("invalid record written: %v", err)
	} else if err := next.ValidateNext(w.store); err != nil {
		w.violate("record refused by the store: %v", err)
	}
	if b, _ := backendOf(next, w.shard); b.Host == w.promoted.Host && b.Port == w.promoted.Port {
		old, _ := backendOf(w.start, w.shard)
		if !w.fenced && w.fenceTries < w.attempts && (old.Host != w.promoted.Host || old.Port != w.promoted.Port) {
			w.violate("record repointed before the old primary was fenced or tried %d times", w.attempts)
		}
	}
	if w.start.Router.Kind == shardmap.Vitess {
		if v := check.RecordMirrorsVitess(next, vitessOf{w}, 0); v != nil {
			w.violate("record repointed before Vitess reparented the tablet: %s", v.Detail)
		}
	}
	r := next.Clone()
	r.Version = w.store.Version + 1
	w.store = r
	if b, _ := backendOf(r, w.shard); b.Host == w.promoted.Host && b.Port == w.promoted.Port {
		w.promotedAt[r.Generation] = true
	}
}

// vitessOf is the world's Vitess topology for check.RecordMirrorsVitess: the start's
// primary of every shard, and the promoted tablet of the failed-over one once reparented.
type vitessOf struct{ w *world }

func (v vitessOf) WasPrimary(shard, tablet string) bool {
	if b, ok := backendOf(v.w.start, shard); ok && b.Tablet == tablet {
		return true
	}
	return shard == v.w.shard && v.w.reparented && tablet == v.w.promoted.Tablet
}

func (v vitessOf) Primary(shard string) string {
	if shard == v.w.shard && v.w.reparented {
		return v.w.promoted.Tablet
	}
	b, _ := backendOf(v.w.start, shard)
	return b.Tablet
}

// removeShard is someone else's write that takes the shard out of the record (a reshard
// finished under the failover).
func (w *world) removeShard() {
	w.store.Version++
	w.store.Generation++
	for i := range w.store.Shards {
		if w.store.Shards[i].Name == w.shard {
			w.store.Shards[i].Name = "s9"
		}
	}
}

// samePlace: a and b are one server (the machine's notion of the old primary being the
// promoted one).
func samePlace(a, b shardmap.Backend) bool { return a.Host == b.Host && a.Port == b.Port }

// wantReplicas is what the repointed shard's replicas must be: those Start names, or else the
// shard's replicas without the promoted one.
func (w *world) wantReplicas() []shardmap.Endpoint {
	if len(w.promoted.Replicas) > 0 {
		return w.promoted.Replicas
	}
	old, _ := backendOf(w.start, w.shard)
	return slices.DeleteFunc(slices.Clone(old.Replicas), func(e shardmap.Endpoint) bool {
		return e.Host == w.promoted.Host && e.Port == w.promoted.Port
	})
}

// alerted reports whether an alert whose reason contains s was raised.
func (w *world) alerted(s string) bool {
	return slices.ContainsFunc(w.alerts, func(a failover.Alert) bool { return strings.Contains(a.Reason, s) })
}

func (w *world) checkEnd(d failover.Done) {
	old, _ := backendOf(w.start, w.shard)
	if v := check.FailoverDone(0, check.FailoverEnd{Done: d, StartGeneration: w.start.Generation, OldFenced: w.fenced,
		SamePlace: samePlace(old, w.promoted), FenceAlerted: w.alerted("could not be fenced"), StoredPromoted: w.promotedAt[d.Generation],
		PgDog: w.start.Router.Kind == shardmap.PgDog, Pushed: w.pushed, Reparented: w.reparented}); v != nil {
		w.violate("%s: %s", v.Invariant, v.Detail)
	}
	if d.Outcome != failover.Repointed {
		return
	}
	b, ok := backendOf(w.store, w.shard)
	if !ok || !samePlace(b, w.promoted) {
		w.violate("repointed but the store names %s:%d", b.Host, b.Port)
	}
	if !slices.Equal(b.Replicas, w.wantReplicas()) {
		w.violate("repointed with replicas %v, want %v", b.Replicas, w.wantReplicas())
	}
}

func stepOf(c failover.Command) string {
	switch c := c.(type) {
	case failover.FenceOld:
		return c.Step
	case failover.Reparent:
		return c.Step
	case failover.WriteRecord:
		return c.Step
	case failover.Push:
		return c.Step
	}
	return ""
}

// pgFixture is PgDog database "app" at generation 4 with two shards; s1's primary
// 10.0.1.2 fails over to its replica 10.0.1.12.
func pgFixture() (*shardmap.Record, string, shardmap.Backend) {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r := shardmap.NewPgHash("app", key,
		shardmap.Backend{Host: "10.0.1.1", Port: 5432, Database: "app", Replicas: []shardmap.Endpoint{{Host: "10.0.1.11", Port: 5432}}},
		shardmap.Backend{Host: "10.0.1.2", Port: 5432, Database: "app", Replicas: []shardmap.Endpoint{{Host: "10.0.1.12", Port: 5432}, {Host: "10.0.1.22", Port: 5432}}})
	r.Version, r.Generation = 30, 4
	return r, "s1", shardmap.Backend{Host: "10.0.1.12", Port: 5432, Database: "app"}
}

// vtFixture is Vitess keyspace "commerce" at generation 9 with shards -80 and 80-; 80-'s
// primary tablet zone1-200 fails over to zone1-201.
func vtFixture() (*shardmap.Record, string, shardmap.Backend) {
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	r, err := shardmap.NewVindex("commerce", key, shardmap.VindexHash,
		shardmap.Backend{Host: "10.0.3.1", Port: 3306, Database: "commerce", Tablet: "zone1-100"},
		shardmap.Backend{Host: "10.0.3.2", Port: 3306, Database: "commerce", Tablet: "zone1-200"})
	if err != nil {
		panic(err)
	}
	r.Version, r.Generation = 50, 9
	return r, "80-", shardmap.Backend{Host: "10.0.3.3", Port: 3306, Database: "commerce", Tablet: "zone1-201"}
}
