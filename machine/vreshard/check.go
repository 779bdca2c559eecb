package vreshard

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"loam.dev/router/kernel/keyrange"
)

// Facts are what the pre-flight needs to know about a keyspace, gathered by the driver
// (vtctld's GetShard/GetTablets/GetVSchema, and each source primary's MySQL variables).
type Facts struct {
	// Shards are the keyspace's shards as the topology has them.
	Shards []ShardFacts
	// Sources are the binlog settings of each source shard's primary MySQL.
	Sources []BinlogFacts
	// Sharded is the VSchema's sharded flag; Tables maps each table of the source schema
	// to its VSchema entry ("" PrimaryVindex when the VSchema has no column vindex for it).
	Sharded bool
	Tables  []TableFacts
}

// ShardFacts is one shard: whether its PRIMARY serves, and its primary tablet ("" none).
type ShardFacts struct {
	Name    string
	Serving bool
	Primary string
}

// BinlogFacts are a source primary's @@binlog_format, @@binlog_row_image and whether GTIDs
// are on (MySQL gtid_mode=ON; MariaDB always has GTIDs, the driver reports true).
type BinlogFacts struct {
	Shard         string
	Format, Image string
	GTID          bool
}

// TableFacts is one table of the source schema and its VSchema entry: Type is "" (a
// sharded table), "reference" or "sequence"; PrimaryVindex the type of the first column
// vindex ("hash", "xxhash", ...; "" when it has none).
type TableFacts struct {
	Name, Type, PrimaryVindex string
}

// uniqueVindexes are the vindex types that can be a primary vindex (unique, functional).
var uniqueVindexes = []string{"hash", "xxhash", "binary_md5", "unicode_loose_md5", "unicode_loose_xxhash", "numeric", "binary", "reverse_bits", "numeric_static_map", "region_experimental", "region_json"}

// Check is the pre-flight: every problem that would make the reshard fail or lose data,
// each saying what to fix. Empty means it may start.
func Check(source, target []string, f Facts) []string {
	var p []string
	add := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	shard := func(name string) *ShardFacts {
		for i := range f.Shards {
			if f.Shards[i].Name == name {
				return &f.Shards[i]
			}
		}
		return nil
	}
	parse := func(side string, names []string) []keyrange.Range {
		var rs []keyrange.Range
		for _, n := range names {
			r, err := keyrange.Parse(n)
			if err != nil {
				add("%s shard %s: %v", side, n, err)
				continue
			}
			rs = append(rs, r)
		}
		// In key order, however the operator listed them: Merge takes adjacent ranges.
		slices.SortFunc(rs, func(a, b keyrange.Range) int { return cmp.Compare(a.Start(), b.Start()) })
		return rs
	}
	if len(source) == 0 || len(target) == 0 {
		add("name the source and the target shards")
		return p
	}
	for _, n := range source {
		switch s := shard(n); {
		case s == nil:
			add("source shard %s does not exist (vtctldclient GetShards)", n)
		case !s.Serving:
			add("source shard %s does not serve primary traffic; a reshard moves serving shards", n)
		case s.Primary == "":
			add("source shard %s has no primary tablet; elect one (PlannedReparentShard)", n)
		}
	}
	for _, n := range target {
		switch s := shard(n); {
		case s == nil:
			add("target shard %s does not exist: create it and start its tablets (vtctldclient CreateShard)", n)
		case s.Serving:
			add("target shard %s already serves; targets must be new shards", n)
		case s.Primary == "":
			add("target shard %s has no primary tablet; elect one (PlannedReparentShard)", n)
		}
		if slices.Contains(source, n) {
			add("shard %s is both a source and a target", n)
		}
	}
	src, tgt := parse("source", source), parse("target", target)
	if len(src) == len(source) && len(tgt) == len(target) {
		a, errA := keyrange.Merge(src)
		b, errB := keyrange.Merge(tgt)
		switch {
		case errA != nil:
			add("the source shards are not adjacent: %v", errA)
		case errB != nil:
			add("the target shards do not partition a range: %v", errB)
		case !a.Equal(b) && !(a.IsFull() && b.IsFull()):
			add("the target shards cover %s but the source shards cover %s; they must cover the same key range", b, a)
		}
	}
	for _, n := range source {
		var b *BinlogFacts
		for i := range f.Sources {
			if f.Sources[i].Shard == n {
				b = &f.Sources[i]
			}
		}
		switch {
		case b == nil:
			add("source shard %s: no binlog settings were read from its primary", n)
			continue
		case !strings.EqualFold(b.Format, "ROW"):
			add("source shard %s: binlog_format is %q; VReplication needs ROW", n, b.Format)
		}
		if !strings.EqualFold(b.Image, "FULL") {
			add("source shard %s: binlog_row_image is %q; VReplication needs FULL", n, b.Image)
		}
		if !b.GTID {
			add("source shard %s: GTIDs are off; VReplication needs gtid_mode=ON with enforce_gtid_consistency", n)
		}
	}
	if !f.Sharded {
		add("the VSchema is not sharded; apply a sharded VSchema with a primary vindex for every table before resharding")
	}
	if len(f.Tables) == 0 {
		add("the source schema has no tables; there is nothing to reshard")
	}
	for _, t := range f.Tables {
		switch {
		case t.Type == "reference" || t.Type == "sequence":
		case t.PrimaryVindex == "":
			add("table %s has no primary vindex in the VSchema; its rows could not be routed to a target shard", t.Name)
		case !slices.Contains(uniqueVindexes, t.PrimaryVindex):
			add("table %s: vindex type %q cannot be a primary vindex (it must be unique and functional, e.g. hash or xxhash)", t.Name, t.PrimaryVindex)
		}
	}
	return p
}
