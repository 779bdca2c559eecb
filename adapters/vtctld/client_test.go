package vtctld_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/vitesstest"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

func dial(t *testing.T, cfg vtctld.Config) *vtctld.Client {
	t.Helper()
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

// tabletType reads a tablet's type from vtctld, through vtctldclient (not the client under
// test).
func tabletType(t *testing.T, c *vitesstest.Cluster, alias string) string {
	t.Helper()
	out := c.MustVtctldclient(t, "GetTablet", alias)
	var tb struct {
		Type string `json:"type"` // vtctldclient prints the enum's name
	}
	require.NoError(t, json.Unmarshal(out, &tb), "%s", out)
	return tb.Type
}

// TestRealReparent: a tablet of a shard without a primary (a REPLICA, as the replica a
// failover promoted outside Vitess is until Vitess is told) becomes the shard's PRIMARY once
// its MariaDB was made writable (before, vtctld's ChangeType fails with errno 1290);
// the answer names the shard and no old primary. Told again, vtctld answers that nothing
// changed: the tablet is both the old and the new primary.
func TestRealReparent(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "promote")
	tb := c.StartTablet(t, "promote", "0")
	require.Equal(t, "REPLICA", tabletType(t, c, tb.Alias))
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr})
	ctx := context.Background()

	// Not made writable first, the client refuses it (adapters.ErrNotWritable) without
	// telling vtctld, whose ChangeType would fail with errno 1290 and leave the tablet
	// record PRIMARY in the topology regardless (checked, see vitesstest.Promote), after
	// which every retry would answer "already primary": TestRealReparentContract.
	vitesstest.Promote(t, tb) // what the promotion outside Vitess does
	got, err := cl.TabletExternallyReparented(ctx, "promote", "0", "zone1-"+strconv.Itoa(int(tb.UID)))
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: "promote", Shard: "0", NewPrimary: tb.Alias}, got)
	require.Equal(t, "PRIMARY", tabletType(t, c, tb.Alias))

	got, err = cl.TabletExternallyReparented(ctx, "promote", "0", tb.Alias)
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: "promote", Shard: "0", NewPrimary: tb.Alias, OldPrimary: tb.Alias}, got)
}

var (
	customerOnce    sync.Once
	customerTablets []*vitesstest.Tablet
)

// customer is keyspace customer with an elected primary tablet in each of -80 and 80-,
// made once for the tests that share it.
func customer(t *testing.T) (*vitesstest.Cluster, []*vitesstest.Tablet) {
	t.Helper()
	c := vt.Get(t)
	customerOnce.Do(func() {
		c.CreateKeyspace(t, "customer")
		customerTablets = c.AddShards(t, "customer", "-80", "80-")
	})
	if len(customerTablets) != 2 {
		t.Fatal("keyspace customer was not set up (an earlier test failed making it)")
	}
	return c, customerTablets
}

// TestRealReparentWrongShard: a tablet of another shard is refused with ErrWrongShard
// before TabletExternallyReparented is sent; nothing changes. A malformed alias reaches no
// RPC; an alias vtctld does not know is ErrNotFound.
func TestRealReparentWrongShard(t *testing.T) {
	c, tablets := customer(t)
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr})
	ctx := context.Background()
	high := tablets[1] // the primary of 80-
	_, err := cl.TabletExternallyReparented(ctx, "customer", "-80", high.Alias)
	require.ErrorIs(t, err, adapters.ErrWrongShard)
	require.ErrorContains(t, err, "tablet "+high.Alias+" serves customer/80-")
	require.ErrorContains(t, err, "nothing was reparented; give a tablet of customer/-80")
	require.Equal(t, "GetTablets", vitessErr(t, err).Op)
	out := c.MustVtctldclient(t, "GetShard", "customer/-80")
	require.Contains(t, string(out), strconv.Itoa(int(tablets[0].UID)), "-80 keeps its primary")

	_, err = cl.TabletExternallyReparented(ctx, "orders", "80-", high.Alias)
	require.ErrorIs(t, err, adapters.ErrWrongShard, "same shard name, other keyspace")

	_, err = cl.TabletExternallyReparented(ctx, "customer", "-80", "zone1-0000000999")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.Equal(t, "GetTablets", vitessErr(t, err).Op)

	_, err = cl.TabletExternallyReparented(ctx, "customer", "-80", "zone1")
	ve := vitessErr(t, err)
	require.Equal(t, "TabletExternallyReparented", ve.Op)
	require.Empty(t, ve.Code, "no RPC for a malformed alias")
	require.Contains(t, ve.Fix, "tablet alias")
}

// TestRealReparentTabletDown: the promoted tablet's vttablet is down, so vtctld can
// neither read its MySQL's read_only (the writability check, ExecuteFetchAsDBA, fails
// first, and vtctld is not told) nor change its type: the error keeps vtctld's gRPC code,
// names the RPC, keyspace, shard and tablet, and the tablet stays a REPLICA in the topology.
func TestRealReparentTabletDown(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "down")
	tb := c.StartTablet(t, "down", "0")
	tb.StopVttablet()
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr, Timeout: time.Minute})
	_, err := cl.TabletExternallyReparented(context.Background(), "down", "0", tb.Alias)
	ve := vitessErr(t, err)
	require.Equal(t, "ExecuteFetchAsDBA", ve.Op)
	require.NotEmpty(t, ve.Code)
	require.Regexp(t, `^vtctld 127\.0\.0\.1:\d+ ExecuteFetchAsDBA keyspace=down shard=0 tablet=`+tb.Alias+` \[\w+\]: .+ \(.+\)$`, err.Error())
	require.Equal(t, "REPLICA", tabletType(t, c, tb.Alias))
}

// TestRealSrvKeyspace: the serving partitions of one cell, read from a real serving graph:
// shard names and key ranges from the key range bytes; an unsharded keyspace's "0" covers
// everything; a shard bound longer than a keyspace ID is refused, not truncated; a cell
// without a serving graph is ErrNotFound with the command that builds it.
func TestRealSrvKeyspace(t *testing.T) {
	c, _ := customer(t)
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr})
	ctx := context.Background()
	parts, err := cl.SrvKeyspace(ctx, "customer", vitesstest.Cell)
	require.NoError(t, err)
	want := []adapters.SrvShard{{Name: "-80", Range: keyrange.MustParse("-80")}, {Name: "80-", Range: keyrange.MustParse("80-")}}
	require.Equal(t, want, adapters.Serving(parts, adapters.TabletPrimary))
	require.Equal(t, want, adapters.Serving(parts, adapters.TabletReplica))

	c.CreateKeyspace(t, "main")
	c.MustVtctldclient(t, "CreateShard", "main/0")
	c.MustVtctldclient(t, "RebuildKeyspaceGraph", "main")
	parts, err = cl.SrvKeyspace(ctx, "main", vitesstest.Cell)
	require.NoError(t, err)
	primary := adapters.Serving(parts, adapters.TabletPrimary)
	require.Len(t, primary, 1)
	require.Equal(t, "0", primary[0].Name)
	require.True(t, primary[0].Range.IsFull())

	c.CreateKeyspace(t, "wide")
	c.MustVtctldclient(t, "CreateShard", "wide/-800000000000000001")
	c.MustVtctldclient(t, "CreateShard", "wide/800000000000000001-")
	c.MustVtctldclient(t, "RebuildKeyspaceGraph", "wide")
	_, err = cl.SrvKeyspace(ctx, "wide", vitesstest.Cell)
	require.ErrorContains(t, err, "longer than 8 bytes")

	_, err = cl.SrvKeyspace(ctx, "customer", "zone2")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.ErrorContains(t, err, "RebuildKeyspaceGraph customer")
	_, err = cl.SrvKeyspace(ctx, "customer", "")
	require.ErrorContains(t, err, "name the cell")
}

// vindexRecord is keyspace customer sharded by hash on orders.order_id.
func vindexRecord(t *testing.T, keyspace string) *shardmap.Record {
	be := func(host, tablet string) shardmap.Backend {
		return shardmap.Backend{Host: host, Port: 3306, Database: keyspace, Tablet: tablet}
	}
	r, err := shardmap.NewVindex(keyspace, shardmap.Key{Column: "order_id", Type: shardmap.Bigint, Tables: []string{"orders"}}, shardmap.VindexHash,
		be("10.0.0.1", "zone1-0000000100"), be("10.0.0.2", "zone1-0000000200"))
	require.NoError(t, err)
	return r
}

// TestRealApplyVSchema: kernel/render's VSchema is what vtctld stores (read back with
// vtctldclient GetVSchema); strict is set, so an unknown vindex parameter is refused by
// vtctld; JSON that is not a vschema.Keyspace is refused before any RPC and changes
// nothing; a keyspace that does not exist is an error with the command that creates it.
func TestRealApplyVSchema(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "vschemas")
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr})
	ctx := context.Background()
	files, err := render.Vitess(vindexRecord(t, "vschemas"), render.Credentials{Users: []render.User{{Name: "app", Password: "pw"}}}, render.VitessOptions{})
	require.NoError(t, err)
	f, ok := files.Get(render.VSchemaFile("vschemas"))
	require.True(t, ok)
	require.NoError(t, cl.ApplyVSchema(ctx, "vschemas", f.Data))
	require.Equal(t, pruned(t, f.Data), pruned(t, c.MustVtctldclient(t, "GetVSchema", "vschemas")))

	// Every field the client encodes, read back.
	full := `{"sharded": true, "require_explicit_routing": true,
	  "vindexes": {"h": {"type": "hash"}, "l": {"type": "lookup_unique", "params": {"table": "l_idx", "from": "a", "to": "keyspace_id"}, "owner": "t"}},
	  "tables": {"t": {"column_vindexes": [{"column": "id", "name": "h"}, {"columns": ["a"], "name": "l"}], "auto_increment": {"column": "id", "sequence": "main.t_seq"}, "column_list_authoritative": true},
	             "r": {"type": "reference", "source": "main.r"}, "p": {"pinned": "80"}}}`
	require.NoError(t, cl.ApplyVSchema(ctx, "vschemas", []byte(full)))
	require.Equal(t, pruned(t, []byte(full)), pruned(t, c.MustVtctldclient(t, "GetVSchema", "vschemas")))

	err = cl.ApplyVSchema(ctx, "vschemas", []byte(`{"sharded": true, "vindexes": {"h": {"type": "hash", "params": {"bogus": "1"}}}}`))
	require.Error(t, err)
	require.ErrorContains(t, err, "bogus")

	err = cl.ApplyVSchema(ctx, "vschemas", []byte(`{"sharded": true, "shardd": 1}`))
	require.ErrorContains(t, err, "not the JSON of vschema.Keyspace")
	require.ErrorContains(t, err, `unknown field "shardd"`)
	require.Empty(t, vitessErr(t, err).Code, "not sent")
	require.Equal(t, pruned(t, []byte(full)), pruned(t, c.MustVtctldclient(t, "GetVSchema", "vschemas")), "a refused VSchema changes nothing")

	err = cl.ApplyVSchema(ctx, "nosuch", f.Data)
	require.ErrorIs(t, err, adapters.ErrNotFound)
	require.ErrorContains(t, err, "vtctldclient CreateKeyspace nosuch")
}

// pruned is VSchema JSON without its unset fields: vtctldclient prints every field of
// vschema.Keyspace, set or not (false, "", [], {}, null, enum "unspecified").
func pruned(t *testing.T, text []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(text, &v), "%s", text)
	var prune func(any) any
	prune = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if e = prune(e); e != nil {
					out[k] = e
				}
			}
			if len(out) == 0 {
				return nil
			}
			return out
		case []any:
			var out []any
			for _, e := range x {
				out = append(out, prune(e))
			}
			if len(out) == 0 {
				return nil
			}
			return out
		case bool:
			if !x {
				return nil
			}
		case string:
			if x == "" || x == "unspecified" {
				return nil
			}
		}
		return v
	}
	return prune(v)
}

// TestUnavailable: nothing listening is ErrUnreachable with code Unavailable, and the
// error says where the client looked.
func TestUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	lis.Close()
	c := dial(t, vtctld.Config{Addr: addr, Timeout: 2 * time.Second})
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

// TestRealDeadline: a vtctld that does not answer (stopped with SIGSTOP) fails the call at
// Config.Timeout even when the caller's context allows longer, and at the caller's
// deadline when that is sooner; both match ErrUnreachable. A cancelled call does not.
func TestRealDeadline(t *testing.T) {
	c, _ := customer(t)
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr, Timeout: 300 * time.Millisecond})
	ctx := context.Background()
	_, err := cl.SrvKeyspace(ctx, "customer", vitesstest.Cell) // connected before the freeze
	require.NoError(t, err)
	require.NoError(t, c.SignalVtctld(syscall.SIGSTOP))
	defer c.SignalVtctld(syscall.SIGCONT)

	long, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	err = cl.ApplyVSchema(long, "customer", []byte(`{}`))
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.Equal(t, "DeadlineExceeded", vitessErr(t, err).Code)
	require.ErrorContains(t, err, "did not answer in time")

	patient := dial(t, vtctld.Config{Addr: c.VtctldAddr, Timeout: time.Hour})
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	_, err = patient.SrvKeyspace(short, "customer", vitesstest.Cell)
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.Equal(t, "DeadlineExceeded", vitessErr(t, err).Code)

	gone, cancel3 := context.WithCancel(ctx)
	cancel3()
	_, err = patient.SrvKeyspace(gone, "customer", vitesstest.Cell)
	require.Equal(t, "Canceled", vitessErr(t, err).Code)
	require.NotErrorIs(t, err, adapters.ErrUnreachable)

	require.NoError(t, c.SignalVtctld(syscall.SIGCONT))
	_, err = cl.SrvKeyspace(ctx, "customer", vitesstest.Cell)
	require.NoError(t, err, "answers again once thawed")
}

// TestRealUnimplemented: a gRPC server without the Vtctld service (here a vttablet's
// port) says how to start vtctld.
func TestRealUnimplemented(t *testing.T) {
	_, tablets := customer(t)
	cl := dial(t, vtctld.Config{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tablets[0].GRPCPort))})
	_, err := cl.SrvKeyspace(context.Background(), "customer", vitesstest.Cell)
	require.Equal(t, "Unimplemented", vitessErr(t, err).Code)
	require.ErrorContains(t, err, "--service-map grpc-vtctld")
	require.True(t, strings.HasPrefix(err.Error(), "vtctld 127.0.0.1:"))
}

// TestRealReparentContract: the reparent contract (conformance.RunReparentSuite), which the
// simulator's vtctld model is held to as well, on a real vtctld with real tablets.
func TestRealReparentContract(t *testing.T) {
	c := vt.Get(t)
	c.CreateKeyspace(t, "contract")
	fresh := c.StartTablet(t, "contract", "-80") // first: the serving graph AddShards builds must cover the range
	other := c.AddShards(t, "contract", "80-")[0]
	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr})
	conformance.RunReparentSuite(t, conformance.ReparentRig{Keyspace: "contract", Shard: "-80", Fresh: fresh.Alias, OtherShard: "80-", Other: other.Alias,
		MakeWritable: func(conformance.TB) {
			// The refusals told vtctld nothing: the tablet is still a REPLICA in the
			// topology, not the half-done PRIMARY a ChangeType failing with errno 1290 leaves.
			require.Equal(t, "REPLICA", tabletType(t, c, fresh.Alias))
			vitesstest.Promote(t, fresh)
		},
		Reparent: cl.TabletExternallyReparented,
		Primary: func(_ conformance.TB, shard string) string {
			var s struct {
				Shard struct {
					PrimaryAlias *struct {
						Cell string `json:"cell"`
						UID  uint32 `json:"uid"`
					} `json:"primary_alias"`
				} `json:"shard"`
			}
			out := c.MustVtctldclient(t, "GetShard", "contract/"+shard)
			require.NoError(t, json.Unmarshal(out, &s), "%s", out)
			if a := s.Shard.PrimaryAlias; a != nil && a.UID != 0 {
				return adapters.TabletAlias{Cell: a.Cell, UID: a.UID}.String()
			}
			return ""
		}})
}
