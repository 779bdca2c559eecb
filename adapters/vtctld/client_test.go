package vtctld_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vschemapb "vitess.io/vitess/go/vt/proto/vschema"
	vtctldatapb "vitess.io/vitess/go/vt/proto/vtctldata"
	vtctlservicepb "vitess.io/vitess/go/vt/proto/vtctlservice"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// customer is a stand-in holding keyspace customer with shards -80 (primary 100, replica
// 101) and 80- (primary 200, replica 201) in cell zone1.
func customer(t *testing.T) (*standIn, *vtctld.Client) {
	s := newStandIn()
	s.addTablet("zone1-0000000100", "customer", "-80", topodatapb.TabletType_PRIMARY)
	s.addTablet("zone1-0000000101", "customer", "-80", topodatapb.TabletType_REPLICA)
	s.addTablet("zone1-0000000200", "customer", "80-", topodatapb.TabletType_PRIMARY)
	s.addTablet("zone1-0000000201", "customer", "80-", topodatapb.TabletType_REPLICA)
	return s, dial(t, s, vtctld.Config{})
}

func dial(t *testing.T, impl vtctlservicepb.VtctldServer, cfg vtctld.Config) *vtctld.Client {
	addr, stop, err := serve(impl)
	require.NoError(t, err)
	t.Cleanup(stop)
	cfg.Addr = addr
	c, err := vtctld.Dial(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func vitessErr(t *testing.T, err error) *adapters.VitessError {
	t.Helper()
	var ve *adapters.VitessError
	require.ErrorAs(t, err, &ve)
	return ve
}

// TestReparentStandIn: the promoted replica of -80 becomes its primary; the answer names
// the shard and both primaries; the tablet was checked before it was reparented.
func TestReparentStandIn(t *testing.T) {
	s, c := customer(t)
	got, err := c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-101")
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: "customer", Shard: "-80", NewPrimary: "zone1-0000000101", OldPrimary: "zone1-0000000100"}, got)
	require.Equal(t, topodatapb.TabletType_PRIMARY, s.tabletType("zone1-0000000101"))
	require.Equal(t, topodatapb.TabletType_REPLICA, s.tabletType("zone1-0000000100"))
	require.Equal(t, []string{"GetTablets", "TabletExternallyReparented"}, s.called())
}

// TestReparentWrongShardStandIn: a tablet of another shard is refused with ErrWrongShard
// before TabletExternallyReparented is sent; nothing changes.
func TestReparentWrongShardStandIn(t *testing.T) {
	s, c := customer(t)
	_, err := c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-0000000201")
	require.ErrorIs(t, err, adapters.ErrWrongShard)
	require.ErrorContains(t, err, "tablet zone1-0000000201 serves customer/80-")
	require.ErrorContains(t, err, "nothing was reparented; give a tablet of customer/-80")
	ve := vitessErr(t, err)
	require.Equal(t, "GetTablets", ve.Op)
	require.Equal(t, []string{"GetTablets"}, s.called())
	require.Equal(t, topodatapb.TabletType_REPLICA, s.tabletType("zone1-0000000201"))
	require.Equal(t, topodatapb.TabletType_PRIMARY, s.tabletType("zone1-0000000200"))

	_, err = c.TabletExternallyReparented(context.Background(), "orders", "-80", "zone1-0000000101")
	require.ErrorIs(t, err, adapters.ErrWrongShard, "same shard name, other keyspace")
}

// TestReparentUnknownTabletStandIn: an alias the topology does not have is ErrNotFound,
// and is not sent to TabletExternallyReparented; a malformed alias reaches no RPC.
func TestReparentUnknownTabletStandIn(t *testing.T) {
	s, c := customer(t)
	_, err := c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-0000000999")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.Equal(t, []string{"GetTablets"}, s.called())

	_, err = c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1")
	ve := vitessErr(t, err)
	require.Equal(t, "TabletExternallyReparented", ve.Op)
	require.Empty(t, ve.Code)
	require.Contains(t, ve.Fix, "tablet alias")
	require.Equal(t, []string{"GetTablets"}, s.called(), "no RPC for a malformed alias")
}

// TestReparentErrorCodeStandIn: an error vtctld returns keeps its gRPC code, names the RPC,
// keyspace, shard and tablet, and says what to do.
func TestReparentErrorCodeStandIn(t *testing.T) {
	s, c := customer(t)
	// The tablet vanishes between the check and the reparent.
	racing := &vanishing{standIn: s}
	c = dial(t, racing, vtctld.Config{})
	_, err := c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-0000000101")
	ve := vitessErr(t, err)
	require.Equal(t, "NotFound", ve.Code)
	require.Equal(t, "TabletExternallyReparented", ve.Op)
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.Regexp(t, `^vtctld 127\.0\.0\.1:\d+ TabletExternallyReparented keyspace=customer shard=-80 tablet=zone1-0000000101 \[NotFound\]: node doesn't exist: /vitess/zone1/tablets/zone1-0000000101/Tablet \(check the names with vtctldclient GetTablets --keyspace customer\)$`, err.Error())
}

// vanishing forgets every tablet once GetTablets has answered.
type vanishing struct{ *standIn }

func (v *vanishing) GetTablets(ctx context.Context, req *vtctldatapb.GetTabletsRequest) (*vtctldatapb.GetTabletsResponse, error) {
	resp, err := v.standIn.GetTablets(ctx, req)
	v.mu.Lock()
	clear(v.tablets)
	v.mu.Unlock()
	return resp, err
}

// TestSrvKeyspaceStandIn: the serving partitions of one cell, with shard names and key
// ranges read from the key range bytes; an unsharded keyspace's "0" covers everything; a
// cell without a serving graph is ErrNotFound with the command that builds it.
func TestSrvKeyspaceStandIn(t *testing.T) {
	s, c := customer(t)
	ref := func(name string, start, end []byte) *topodatapb.ShardReference {
		return &topodatapb.ShardReference{Name: name, KeyRange: &topodatapb.KeyRange{Start: start, End: end}}
	}
	s.srv["zone1"] = map[string]*topodatapb.SrvKeyspace{
		"customer": {Partitions: []*topodatapb.SrvKeyspace_KeyspacePartition{
			{ServedType: topodatapb.TabletType_PRIMARY, ShardReferences: []*topodatapb.ShardReference{ref("-80", nil, []byte{0x80}), ref("80-", []byte{0x80}, nil)}},
			{ServedType: topodatapb.TabletType_REPLICA, ShardReferences: []*topodatapb.ShardReference{ref("-80", nil, []byte{0x80}), ref("80-", []byte{0x80}, nil)}},
		}},
		"main": {Partitions: []*topodatapb.SrvKeyspace_KeyspacePartition{
			{ServedType: topodatapb.TabletType_PRIMARY, ShardReferences: []*topodatapb.ShardReference{{Name: "0"}}},
		}},
	}
	ctx := context.Background()
	parts, err := c.SrvKeyspace(ctx, "customer", "zone1")
	require.NoError(t, err)
	require.Len(t, parts, 2)
	primary := adapters.Serving(parts, adapters.TabletPrimary)
	require.Equal(t, []adapters.SrvShard{{Name: "-80", Range: keyrange.MustParse("-80")}, {Name: "80-", Range: keyrange.MustParse("80-")}}, primary)
	require.Equal(t, adapters.TabletReplica, parts[1].Type)

	parts, err = c.SrvKeyspace(ctx, "main", "zone1")
	require.NoError(t, err)
	require.Equal(t, "0", parts[0].Shards[0].Range.String())
	require.True(t, parts[0].Shards[0].Range.IsFull())

	_, err = c.SrvKeyspace(ctx, "customer", "zone2")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.ErrorContains(t, err, "vtctldclient RebuildKeyspaceGraph customer")
	_, err = c.SrvKeyspace(ctx, "customer", "")
	require.ErrorContains(t, err, "name the cell")

	// A bound longer than a keyspace ID is refused, not truncated.
	s.srv["zone1"]["wide"] = &topodatapb.SrvKeyspace{Partitions: []*topodatapb.SrvKeyspace_KeyspacePartition{
		{ServedType: topodatapb.TabletType_PRIMARY, ShardReferences: []*topodatapb.ShardReference{ref("-800000000000000001", nil, []byte{0x80, 0, 0, 0, 0, 0, 0, 0, 1})}},
	}}
	_, err = c.SrvKeyspace(ctx, "wide", "zone1")
	require.ErrorContains(t, err, "longer than 8 bytes")
}

// vindexRecord is keyspace customer sharded by hash on orders.order_id.
func vindexRecord(t *testing.T) *shardmap.Record {
	be := func(host, tablet string) shardmap.Backend {
		return shardmap.Backend{Host: host, Port: 3306, Database: "customer", Tablet: tablet}
	}
	r, err := shardmap.NewVindex("customer", shardmap.Key{Column: "order_id", Type: shardmap.Bigint, Tables: []string{"orders"}}, shardmap.VindexHash,
		be("10.0.0.1", "zone1-0000000100"), be("10.0.0.2", "zone1-0000000200"))
	require.NoError(t, err)
	return r
}

// TestApplyVSchemaStandIn: kernel/render's VSchema reaches vtctld as the vschema.Keyspace
// it encodes, with strict set; JSON that is not a vschema.Keyspace is refused before any
// RPC; a keyspace that does not exist is an error with the command that creates it.
func TestApplyVSchemaStandIn(t *testing.T) {
	s, c := customer(t)
	files, err := render.Vitess(vindexRecord(t), render.Credentials{Users: []render.User{{Name: "app", Password: "pw"}}}, render.VitessOptions{})
	require.NoError(t, err)
	f, ok := files.Get(render.VSchemaFile("customer"))
	require.True(t, ok)
	ctx := context.Background()
	require.NoError(t, c.ApplyVSchema(ctx, "customer", f.Data))
	req := s.applied["customer"]
	require.True(t, req.GetStrict())
	var want vschemapb.Keyspace
	require.NoError(t, protojson.Unmarshal(f.Data, &want))
	require.True(t, proto.Equal(&want, req.GetVSchema()), "sent %v", req.GetVSchema())
	require.True(t, req.GetVSchema().GetSharded())
	require.Equal(t, "hash", req.GetVSchema().GetVindexes()["hash"].GetType())

	calls := len(s.called())
	err = c.ApplyVSchema(ctx, "customer", []byte(`{"sharded": true, "shardd": 1}`))
	require.ErrorContains(t, err, "not the JSON of vschema.Keyspace")
	require.Len(t, s.called(), calls, "a bad VSchema is not sent")

	err = c.ApplyVSchema(ctx, "nosuch", f.Data)
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.ErrorContains(t, err, "vtctldclient CreateKeyspace nosuch")
}

// TestUnavailable: nothing listening is ErrUnreachable with code Unavailable, and the
// error says where the client looked.
func TestUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	c, err := vtctld.Dial(vtctld.Config{Addr: addr, Timeout: 2 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-0000000101")
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	ve := vitessErr(t, err)
	require.Equal(t, "Unavailable", ve.Code)
	require.Equal(t, "GetTablets", ve.Op)
	require.ErrorContains(t, err, "keyspace=customer shard=-80 tablet=zone1-0000000101")
	require.ErrorContains(t, err, "serves gRPC at "+addr+" (its --grpc-port)")

	_, err = vtctld.Dial(vtctld.Config{})
	require.ErrorContains(t, err, "Config.Addr is empty")
}

// TestDeadlineStandIn: a vtctld that does not answer fails the call at Config.Timeout even
// when the caller's context allows longer, and at the caller's deadline when that is
// sooner; both match ErrUnreachable.
func TestDeadlineStandIn(t *testing.T) {
	s := newStandIn()
	s.keyspaces["customer"] = true
	s.hold = make(chan struct{})
	defer close(s.hold)
	c := dial(t, s, vtctld.Config{Timeout: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := c.ApplyVSchema(ctx, "customer", []byte(`{}`))
	require.Less(t, time.Since(start), 30*time.Second)
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.Equal(t, "DeadlineExceeded", vitessErr(t, err).Code)
	require.ErrorContains(t, err, "did not answer in time")

	c = dial(t, s, vtctld.Config{Timeout: time.Minute})
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err = c.SrvKeyspace(short, "customer", "zone1")
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.Equal(t, "DeadlineExceeded", vitessErr(t, err).Code)

	gone, cancel3 := context.WithCancel(context.Background())
	cancel3()
	_, err = c.SrvKeyspace(gone, "customer", "zone1")
	require.Equal(t, "Canceled", vitessErr(t, err).Code)
	require.NotErrorIs(t, err, adapters.ErrUnreachable)
}

// TestUnimplementedStandIn: a server without the Vtctld methods (another service on the
// port, or vtctld without grpc-vtctld in its service map) says how to start vtctld.
func TestUnimplementedStandIn(t *testing.T) {
	c := dial(t, vtctlservicepb.UnimplementedVtctldServer{}, vtctld.Config{})
	_, err := c.SrvKeyspace(context.Background(), "customer", "zone1")
	require.Equal(t, "Unimplemented", vitessErr(t, err).Code)
	require.ErrorContains(t, err, "--service-map grpc-vtctld")
}
