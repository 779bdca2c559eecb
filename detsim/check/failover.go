package check

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
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
