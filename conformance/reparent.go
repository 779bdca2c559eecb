package conformance

import (
	"context"
	"errors"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
)

// ReparentRig is one VitessControl's answer to TabletExternallyReparented, set up for the
// reparent contract: keyspace Keyspace has a shard Shard with no primary, whose tablet Fresh
// was promoted outside Vitess, and a shard OtherShard whose tablet Other is its primary. The
// real rig is a real vtctld with real tablets (adapters/vtctld); the simulator's is
// detsim/model.Vtctld.
type ReparentRig struct {
	Keyspace, Shard, Fresh, OtherShard, Other string
	// Reparent calls TabletExternallyReparented.
	Reparent func(ctx context.Context, keyspace, shard, tablet string) (adapters.Reparented, error)
	// Primary is the primary tablet of a shard of Keyspace as the implementation's topology
	// has it ("" for none), read without Reparent.
	Primary func(t TB, shard string) string
	// MakeWritable, when set, says Fresh's MySQL starts read-only (the promotion outside
	// Vitess has not finished) and makes it writable: the suite then holds the rig to
	// refusing Fresh with ErrNotWritable, reparenting nothing, as often as it is asked,
	// before calling it.
	MakeWritable func(t TB)
}

// RunReparentSuite holds rig to what adapters.VitessControl promises of
// TabletExternallyReparented and what a real vtctld (v0.24.4) was seen to answer, in order
// on the one rig: an unknown tablet is ErrNotFound and a tablet of another shard
// ErrWrongShard, both changing nothing; (with MakeWritable) a read-only promoted MySQL is
// ErrNotWritable every time, changing nothing; the fresh tablet becomes its shard's primary, the
// answer naming no old primary; told again, the answer names it as both old and new.
func RunReparentSuite(t TB, rig ReparentRig) {
	t.Helper()
	ctx := t.Context()
	_, err := rig.Reparent(ctx, rig.Keyspace, rig.Shard, "zone1-0000999999")
	require.True(t, errors.Is(err, adapters.ErrNotFound), "an unknown tablet: want ErrNotFound, got %v", err)
	_, err = rig.Reparent(ctx, rig.Keyspace, rig.Shard, rig.Other)
	require.True(t, errors.Is(err, adapters.ErrWrongShard), "a tablet of %s named for %s: want ErrWrongShard, got %v", rig.OtherShard, rig.Shard, err)
	require.Equal(t, "", rig.Primary(t, rig.Shard), "refusals reparent nothing")
	require.Equal(t, rig.Other, rig.Primary(t, rig.OtherShard), "refusals reparent nothing")

	if rig.MakeWritable != nil {
		// Twice: a real vtctld told while the MySQL is read-only fails with errno 1290 but
		// leaves the tablet PRIMARY in its topology, so a second call would answer "already
		// primary" and pass for done.
		for i := range 2 {
			_, err = rig.Reparent(ctx, rig.Keyspace, rig.Shard, rig.Fresh)
			require.True(t, errors.Is(err, adapters.ErrNotWritable), "call %d on a read-only promoted MySQL: want ErrNotWritable, got %v", i+1, err)
			require.Equal(t, "", rig.Primary(t, rig.Shard), "a read-only promoted MySQL is not reparented")
		}
		rig.MakeWritable(t)
	}

	got, err := rig.Reparent(ctx, rig.Keyspace, rig.Shard, rig.Fresh)
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: rig.Keyspace, Shard: rig.Shard, NewPrimary: rig.Fresh}, got)
	require.Equal(t, rig.Fresh, rig.Primary(t, rig.Shard))
	got, err = rig.Reparent(ctx, rig.Keyspace, rig.Shard, rig.Fresh)
	require.NoError(t, err)
	require.Equal(t, adapters.Reparented{Keyspace: rig.Keyspace, Shard: rig.Shard, NewPrimary: rig.Fresh, OldPrimary: rig.Fresh}, got)
	require.Equal(t, rig.Other, rig.Primary(t, rig.OtherShard))
}
