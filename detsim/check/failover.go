package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/failover"
)

// Invariants of a failover (§9.1), as named in reports.
const (
	// InvOneWritable: at every instant, at most one of a shard's servers is both routed (a
	// router or vtgate that is up sends the shard's writes there) and writable (up, the
	// application role may log in, and a primary).
	InvOneWritable = "one-writable-primary"
	// InvMirrorsVitess: the record never names, as a shard's primary, a tablet Vitess has
	// not made that shard's primary: the record mirrors Vitess's topology, it may lag it,
	// never lead it.
	InvMirrorsVitess = "record-mirrors-vitess"
)

// OneWritablePrimary is InvOneWritable at one instant: routed maps each router (or vtgate)
// that is up to the server it sends the shard's writes to, writable says whether a server
// takes writes now. Two distinct servers both routed and writable are two primaries clients
// can write to, each unaware of the other's writes.
func OneWritablePrimary(shard string, routed map[string]string, writable func(server string) bool, now int64) *detsim.Violation {
	by := map[string][]string{}
	for _, r := range slices.Sorted(maps.Keys(routed)) {
		if srv := routed[r]; writable(srv) {
			by[srv] = append(by[srv], r)
		}
	}
	if len(by) < 2 {
		return nil
	}
	var parts []string
	for _, srv := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s (routed by %s)", srv, strings.Join(by[srv], ",")))
	}
	return &detsim.Violation{Invariant: InvOneWritable, T: now,
		Detail: fmt.Sprintf("shard %s has %d writable primaries routed at once: %s", shard, len(by), strings.Join(parts, " and "))}
}

// Primaries is what RecordMirrorsVitess reads of Vitess's topology: whether it has made a
// tablet a shard's primary by now, and the shard's primary now. The simulator passes its
// vtctld model; the failover machine's world test (machine/failover) its own world, so the
// invariant is the same code in both tiers.
type Primaries interface {
	WasPrimary(shard, tablet string) bool
	Primary(shard string) string
}

var _ Primaries = (*model.Vtctld)(nil)

// RecordMirrorsVitess is InvMirrorsVitess for one stored record: every shard's tablet must
// be one Vitess has made that shard's primary by now.
func RecordMirrorsVitess(rec *shardmap.Record, v Primaries, now int64) *detsim.Violation {
	for _, l := range []*shardmap.Layout{&rec.Layout, rec.Target} {
		if l == nil {
			continue
		}
		for _, sh := range l.Shards {
			if !v.WasPrimary(sh.Name, sh.Backend.Tablet) {
				return &detsim.Violation{Invariant: InvMirrorsVitess, T: now,
					Detail: fmt.Sprintf("record version %d (generation %d) names tablet %s primary of %s/%s, which Vitess has not made primary (Vitess's primary: %s)",
						rec.Version, rec.Generation, sh.Backend.Tablet, rec.Router.Name, sh.Name, v.Primary(sh.Name))}
			}
		}
	}
	return nil
}

// InvFailoverDone is the failover's Done held against the world: what it tells the
// operator is so. Fenced means the old primary refuses the application's writes; a
// Repointed failover that did not fence the old primary (and did not find the promoted one
// in its place) alerted that it could not; Repointed names a generation above the start's
// that the store held naming the promoted primary, which ConfigPush was handed (PgDog) or
// after which Vitess made the promoted tablet primary.
const InvFailoverDone = "failover-done"

// FailoverEnd is the world when a failover machine reports Done.
type FailoverEnd struct {
	Done failover.Done
	// StartGeneration is the generation of the record the failover started from.
	StartGeneration uint64
	// OldFenced: the old primary refuses the application role's writes now.
	OldFenced bool
	// SamePlace: the promoted primary is where the old one was (nothing to fence).
	SamePlace bool
	// FenceAlerted: the machine alerted that the old primary could not be fenced.
	FenceAlerted bool
	// StoredPromoted: a record the store held at Done.Generation names the promoted primary.
	StoredPromoted bool
	// PgDog: the router is PgDog (else Vitess). Pushed is the last generation handed to
	// ConfigPush; Reparented whether Vitess made the promoted tablet the shard's primary.
	PgDog      bool
	Pushed     uint64
	Reparented bool
}

// FailoverDone checks InvFailoverDone at time t.
func FailoverDone(t int64, e FailoverEnd) *detsim.Violation {
	d := e.Done
	bad := func(format string, a ...any) *detsim.Violation {
		return &detsim.Violation{Invariant: InvFailoverDone, T: t, Detail: fmt.Sprintf(format, a...)}
	}
	switch {
	case d.Fenced && !e.OldFenced:
		return bad("done says fenced but the old primary takes writes")
	case d.Outcome != failover.Repointed:
		return nil
	case !d.Fenced && !e.SamePlace && !e.FenceAlerted:
		return bad("repointed without fencing the old primary and without an alert saying so")
	case d.Generation <= e.StartGeneration:
		return bad("repointed at generation %d, not above the start's %d: routers cannot tell the new files from the old", d.Generation, e.StartGeneration)
	case !e.StoredPromoted:
		return bad("repointed at generation %d, which no stored record naming the promoted primary has", d.Generation)
	case e.PgDog && e.Pushed != d.Generation:
		return bad("repointed at generation %d but ConfigPush has %d", d.Generation, e.Pushed)
	case !e.PgDog && !e.Reparented:
		return bad("repointed but Vitess was never reparented")
	}
	return nil
}
