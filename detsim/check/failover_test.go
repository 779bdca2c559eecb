package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
)

func TestOneWritablePrimary(t *testing.T) {
	writable := map[string]bool{"old": true, "new": true}
	w := func(s string) bool { return writable[s] }
	require.Nil(t, check.OneWritablePrimary("s0", map[string]string{"r0": "old", "r1": "old"}, w, 1), "one server, however many routers")
	v := check.OneWritablePrimary("s0", map[string]string{"r0": "old", "r1": "new"}, w, 5)
	require.NotNil(t, v)
	require.Equal(t, check.InvOneWritable, v.Invariant)
	require.Contains(t, v.Detail, "new (routed by r1) and old (routed by r0)")
	writable["old"] = false // fenced
	require.Nil(t, check.OneWritablePrimary("s0", map[string]string{"r0": "old", "r1": "new"}, w, 6), "a fenced server does not count")
}

func TestRecordMirrorsVitess(t *testing.T) {
	v := model.NewVtctld(nil, "vtctld", "app")
	v.AddTablet(model.Tablet{Alias: "zone1-0000000100", Shard: "-", Backend: "a"}, true)
	v.AddTablet(model.Tablet{Alias: "zone1-0000000101", Shard: "-", Backend: "b"}, false)
	rec, err := shardmap.NewVindex("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.VindexHash,
		shardmap.Backend{Host: "a", Port: 3306, Database: "app", Tablet: "zone1-0000000100"})
	require.NoError(t, err)
	require.Nil(t, check.RecordMirrorsVitess(rec, v, 0))
	ahead := rec.Clone()
	ahead.Layout.Shards[0].Backend = shardmap.Backend{Host: "b", Port: 3306, Database: "app", Tablet: "zone1-0000000101"}
	got := check.RecordMirrorsVitess(ahead, v, 1)
	require.NotNil(t, got, "the record leads Vitess")
	require.Equal(t, check.InvMirrorsVitess, got.Invariant)
	_, err = v.TabletExternallyReparented("app", "-", "zone1-0000000101")
	require.NoError(t, err)
	require.Nil(t, check.RecordMirrorsVitess(ahead, v, 2), "now it mirrors")
	require.Nil(t, check.RecordMirrorsVitess(rec, v, 3), "lagging is allowed: the record follows Vitess")
}
