package model_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
)

func vitessWorld(t *testing.T, force ...detsim.Firing) (*detsim.Sim, *model.Vtctld, []*model.VTGate, model.Directory) {
	t.Helper()
	s := forcedSim(force...)
	dir := model.Directory{}
	for _, n := range []string{"mysql-a", "mysql-b", "mysql-c"} {
		dir[n] = model.NewBackend(s, n, "app")
	}
	v := model.NewVtctld(s, "vtctld", "commerce")
	v.AddTablet(model.Tablet{Alias: "zone1-0000000100", Shard: "-80", Backend: "mysql-a"}, true)
	v.AddTablet(model.Tablet{Alias: "zone1-0000000101", Shard: "-80", Backend: "mysql-b"}, false)
	v.AddTablet(model.Tablet{Alias: "zone1-0000000200", Shard: "80-", Backend: "mysql-c"}, true)
	var gates []*model.VTGate
	for _, id := range []string{"vtgate-0", "vtgate-1"} {
		gates = append(gates, model.NewVTGate(s, id, "app", v, dir, []string{"-80", "80-"}, 5000))
	}
	return s, v, gates, dir
}

// TestVtctldReparent: TabletExternallyReparented as adapters.VitessControl promises it: a
// tablet of another shard is ErrWrongShard and nothing moves, an unknown one ErrNotFound, a
// reparent to the primary itself is a no-op, and a real one is recorded with the old
// primary and reaches every vtgate.
func TestVtctldReparent(t *testing.T) {
	s, v, gates, _ := vitessWorld(t)
	_, err := v.TabletExternallyReparented("commerce", "-80", "zone1-0000000200")
	require.ErrorIs(t, err, adapters.ErrWrongShard)
	_, err = v.TabletExternallyReparented("commerce", "-80", "zone1-0000000999")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	var ve *adapters.VitessError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "zone1-0000000100", v.Primary("-80"), "nothing was reparented")
	rep, err := v.TabletExternallyReparented("commerce", "-80", "zone1-0000000100")
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: "commerce", Shard: "-80", NewPrimary: "zone1-0000000100", OldPrimary: "zone1-0000000100"}, rep)
	require.Len(t, v.Reparents, 2, "a no-op reparent records nothing")

	rep, err = v.TabletExternallyReparented("commerce", "-80", "zone1-0000000101")
	require.NoError(t, err)
	require.Equal(t, "zone1-0000000100", rep.OldPrimary)
	require.True(t, v.WasPrimary("-80", "zone1-0000000101"))
	require.True(t, v.WasPrimary("-80", "zone1-0000000100"))
	require.False(t, v.WasPrimary("80-", "zone1-0000000101"))
	require.Equal(t, "mysql-a", gates[0].Routes("-80"), "a vtgate learns it by message, not at once")
	s.Run(1000, 100)
	for _, g := range gates {
		require.Equal(t, "mysql-b", g.Routes("-80"))
		require.Equal(t, "mysql-c", g.Routes("80-"))
	}
}

// TestVtctldUnavailable: the injected fault answers Unavailable and reparents nothing.
func TestVtctldUnavailable(t *testing.T) {
	_, v, _, _ := vitessWorld(t, detsim.Firing{Point: "vtctld.reparent.fail", N: 1})
	_, err := v.TabletExternallyReparented("commerce", "-80", "zone1-0000000101")
	require.ErrorIs(t, err, model.ErrVtctldUnavailable)
	var ve *adapters.VitessError
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "Unavailable", ve.Code)
	require.Equal(t, "zone1-0000000100", v.Primary("-80"))
	_, err = v.TabletExternallyReparented("commerce", "-80", "zone1-0000000101")
	require.NoError(t, err, "the retry goes through")
}

// TestVTGateIgnoresAnOlderTopology: a topology message that arrives after a newer one does
// not take the gate back (the slow link makes the refresh sent first arrive last).
func TestVTGateIgnoresAnOlderTopology(t *testing.T) {
	s, v, gates, _ := vitessWorld(t)
	g := gates[0]
	s.Net.Slow(v.Node, g.Node, 50)
	s.Run(5000, 100) // the periodic refresh leaves on the slow link, with the old topology
	s.Net.Slow(v.Node, g.Node, 1)
	_, err := v.TabletExternallyReparented("commerce", "-80", "zone1-0000000101")
	require.NoError(t, err)
	s.Run(9000, 1000) // the reparent's message arrives first, the slow refresh after it
	require.Equal(t, "mysql-b", g.Routes("-80"))
}

// TestVTGateQuery: a transaction runs on the primary its gate routes to.
func TestVTGateQuery(t *testing.T) {
	s, _, gates, dir := vitessWorld(t)
	client := s.Net.AddNode("client")
	var got error
	done := false
	key := "k"
	txn := model.Txn{ID: 1, Ops: []model.Op{{Kind: model.OpAppend, Key: key, Value: 7}}}
	s.Net.Call(client, gates[1].Node, "query", 0, func(rep detsim.Reply) { gates[1].Query(txn, rep) },
		func(_ any, err error) { got, done = err, true })
	s.Run(1000, 100)
	require.True(t, done)
	require.NoError(t, got)
	shard := []string{"-80", "80-"}[model.Route(key, 2)]
	require.Equal(t, []int64{7}, dir[gates[1].Routes(shard)].Row(key))
}

// TestVtctldReparentContract: the model answers the reparent contract as the real vtctld
// does (adapters/vtctld's TestRealReparentContract runs the same suite on one).
func TestVtctldReparentContract(t *testing.T) {
	v := model.NewVtctld(nil, "vtctld", "contract")
	v.AddTablet(model.Tablet{Alias: "zone1-0000000101", Shard: "-80", Backend: "db-a", ReadOnly: true}, false)
	v.AddTablet(model.Tablet{Alias: "zone1-0000000100", Shard: "80-", Backend: "db-b"}, true)
	conformance.RunReparentSuite(t, conformance.ReparentRig{Keyspace: "contract", Shard: "-80", Fresh: "zone1-0000000101", OtherShard: "80-", Other: "zone1-0000000100",
		MakeWritable: func(conformance.TB) { v.SetWritable("zone1-0000000101") },
		Reparent: func(_ context.Context, keyspace, shard, tablet string) (adapters.Reparented, error) {
			return v.TabletExternallyReparented(keyspace, shard, tablet)
		},
		Primary: func(_ conformance.TB, shard string) string { return v.Primary(shard) }})
}
