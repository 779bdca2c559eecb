package vitesstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"loam.dev/router/vitesslaunch"
)

// EnvRequireReal, set to 1, turns every "skipped: needs vitess" into a test failure; CI
// sets it so that a missing Vitess cannot pass as a green run.
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// What a test uses of vitesslaunch, under the names the tests have always used.
const (
	EnvBinDir     = vitesslaunch.EnvBinDir
	Version       = vitesslaunch.Version
	Cell          = vitesslaunch.Cell
	WriterSchema  = vitesslaunch.WriterSchema
	WriterVSchema = vitesslaunch.WriterVSchema
)

type (
	Tablet    = vitesslaunch.Tablet
	Gate      = vitesslaunch.Gate
	Writer    = vitesslaunch.Writer
	ShardRows = vitesslaunch.ShardRows
)

// ErrNoBinaries means a program the cluster needs is missing (vitesslaunch.ErrNoBinaries).
var ErrNoBinaries = vitesslaunch.ErrNoBinaries

// NewWriter is vitesslaunch.NewWriter.
var NewWriter = vitesslaunch.NewWriter

// Holds is vitesslaunch.Holds.
var Holds = vitesslaunch.Holds

// Cluster is a running Vitess (a vitesslaunch.Cluster: TopoAddr, VtctldAddr, Vtctldclient,
// NewKeyspace, StartShards, OpenVtgate, Close, ...) with the helpers a test uses on it,
// which fail the test instead of returning errors.
type Cluster struct {
	*vitesslaunch.Cluster
}

// Start starts etcd and vtctld, registers the cell, and registers the cluster's shutdown and
// removal with t.Cleanup. Without the programs it skips the test (fails it under
// LOAM_REQUIRE_REAL=1); any other failure fails the test, quoting the program's log.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := vitesslaunch.Open()
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return &Cluster{c}
}

// StartVtctld starts another vtctld on the cluster's topology, with extra flags (e.g.
// --grpc-cert and --grpc-key, files written with WriteFile), and returns its gRPC address.
// Close stops it.
func (c *Cluster) StartVtctld(t testing.TB, extra ...string) string {
	t.Helper()
	addr, err := c.OpenVtctld(extra...)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// WriteFile writes a file the cluster's programs can read (mode 0600, owned by their user)
// and returns its path.
func (c *Cluster) WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p, err := c.PlaceFile(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustVtctldclient is Vtctldclient failing the test on error, with a two-minute bound.
func (c *Cluster) MustVtctldclient(t testing.TB, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Vtctldclient(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CreateKeyspace creates keyspace with durability policy "none" (the only one tablets on
// MariaDB without replicas can meet).
func (c *Cluster) CreateKeyspace(t testing.TB, keyspace string) {
	t.Helper()
	if err := c.NewKeyspace(context.Background(), keyspace); err != nil {
		t.Fatal(err)
	}
}

// AddShards starts one tablet per shard of keyspace (which CreateKeyspace made), elects it
// primary with PlannedReparentShard, and rebuilds the keyspace's serving graph. The tablets
// are in the order of shards.
func (c *Cluster) AddShards(t testing.TB, keyspace string, shards ...string) []*Tablet {
	t.Helper()
	tablets, err := c.StartShards(context.Background(), keyspace, shards...)
	if err != nil {
		t.Fatal(err)
	}
	return tablets
}

// StartTablet starts a tablet of keyspace/shard (keyspace made by CreateKeyspace) and
// elects nothing: it serves as a REPLICA, and its shard has no primary unless one was
// elected before. A test makes it primary as a failover would, with
// TabletExternallyReparented.
func (c *Cluster) StartTablet(t testing.TB, keyspace, shard string) *Tablet {
	t.Helper()
	tb, err := c.OpenTablet(keyspace, shard)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// StartVtgate starts a vtgate watching the cluster's cell and the given keyspaces (see
// vitesslaunch's OpenVtgate), failing the test on error. Close stops it.
func (c *Cluster) StartVtgate(t testing.TB, keyspaces ...string) *Gate {
	t.Helper()
	g, err := c.OpenVtgate(keyspaces...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Promote makes tb's MariaDB writable, as a promotion outside Vitess does before Vitess is
// told (Tablet.Promote), failing the test on error.
func Promote(t testing.TB, tb *Tablet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tb.Promote(ctx); err != nil {
		t.Fatal(err)
	}
}

// Ints runs query on tb's database as vt_dba and returns its first column as integers
// (Tablet.Ints), failing the test on error.
func Ints(t testing.TB, tb *Tablet, query string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := tb.Ints(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fail ends a test whose cluster could not start: a skip where this machine cannot run
// Vitess at all (a failure under LOAM_REQUIRE_REAL=1), a failure otherwise.
func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) {
		msg := fmt.Sprintf("skipped: needs vitess (%s) (%v)", EnvBinDir, err)
		if os.Getenv(EnvRequireReal) == "1" {
			t.Fatalf("%s; failing instead because %s=1", msg, EnvRequireReal)
		}
		t.Skip(msg)
	}
	t.Fatal(err)
}
