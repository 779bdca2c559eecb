package vreshard_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/vreshard"
)

func goodFacts() vreshard.Facts {
	return vreshard.Facts{
		Shards: []vreshard.ShardFacts{{Name: "0", Serving: true, Primary: "zone1-0000000100"},
			{Name: "-80", Primary: "zone1-0000000200"}, {Name: "80-", Primary: "zone1-0000000201"}},
		Sources: []vreshard.BinlogFacts{{Shard: "0", Format: "ROW", Image: "FULL", GTID: true}},
		Sharded: true,
		Tables:  []vreshard.TableFacts{{Name: "customer", PrimaryVindex: "hash"}, {Name: "zip", Type: "reference"}},
	}
}

// TestCheck: the pre-flight passes a sound keyspace, and each thing that would make the
// reshard fail or lose rows is named, with what to do.
func TestCheck(t *testing.T) {
	src, tgt := []string{"0"}, []string{"-80", "80-"}
	require.Empty(t, vreshard.Check(src, tgt, goodFacts()))
	require.Empty(t, vreshard.Check([]string{"-80"}, []string{"-40", "40-80"}, vreshard.Facts{
		Shards:  []vreshard.ShardFacts{{Name: "-80", Serving: true, Primary: "a"}, {Name: "-40", Primary: "b"}, {Name: "40-80", Primary: "c"}},
		Sources: []vreshard.BinlogFacts{{Shard: "-80", Format: "row", Image: "full", GTID: true}}, Sharded: true,
		Tables: []vreshard.TableFacts{{Name: "t", PrimaryVindex: "xxhash"}}}), "a split of one shard of a sharded keyspace")
	require.Empty(t, vreshard.Check(src, []string{"80-", "-80"}, goodFacts()), "the targets listed out of key order")

	for _, tc := range []struct {
		name   string
		src    []string
		tgt    []string
		change func(*vreshard.Facts)
		want   string
	}{
		{"source missing", src, tgt, func(f *vreshard.Facts) { f.Shards = f.Shards[1:] }, "source shard 0 does not exist"},
		{"source not serving", src, tgt, func(f *vreshard.Facts) { f.Shards[0].Serving = false }, "source shard 0 does not serve"},
		{"no source primary", src, tgt, func(f *vreshard.Facts) { f.Shards[0].Primary = "" }, "source shard 0 has no primary"},
		{"target serving", src, tgt, func(f *vreshard.Facts) { f.Shards[1].Serving = true }, "target shard -80 already serves"},
		{"target without primary", src, tgt, func(f *vreshard.Facts) { f.Shards[2].Primary = "" }, "target shard 80- has no primary"},
		{"gap", src, []string{"-40", "80-"}, func(f *vreshard.Facts) { f.Shards[1].Name = "-40" }, "the target shards do not partition a range"},
		{"short", src, []string{"-80"}, nil, "the target shards cover -80 but the source shards cover -;"},
		{"statement binlog", src, tgt, func(f *vreshard.Facts) { f.Sources[0].Format = "STATEMENT" }, `binlog_format is "STATEMENT"`},
		{"minimal image", src, tgt, func(f *vreshard.Facts) { f.Sources[0].Image = "MINIMAL" }, `binlog_row_image is "MINIMAL"`},
		{"gtid off", src, tgt, func(f *vreshard.Facts) { f.Sources[0].GTID = false }, "GTIDs are off"},
		{"no binlog facts", src, tgt, func(f *vreshard.Facts) { f.Sources = nil }, "no binlog settings were read"},
		{"unsharded vschema", src, tgt, func(f *vreshard.Facts) { f.Sharded = false }, "the VSchema is not sharded"},
		{"table without vindex", src, tgt, func(f *vreshard.Facts) { f.Tables = append(f.Tables, vreshard.TableFacts{Name: "orders"}) }, "table orders has no primary vindex"},
		{"lookup as primary", src, tgt, func(f *vreshard.Facts) { f.Tables[0].PrimaryVindex = "lookup" }, `vindex type "lookup" cannot be a primary vindex`},
		{"no tables", src, tgt, func(f *vreshard.Facts) { f.Tables = nil }, "no tables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := goodFacts()
			if tc.change != nil {
				tc.change(&f)
			}
			got := vreshard.Check(tc.src, tc.tgt, f)
			require.True(t, strings.Contains(strings.Join(got, "\n"), tc.want), "want %q in %q", tc.want, got)
		})
	}
}
