package valkey_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// TestRealExecutorStandalone: pod versions round-trip; the backfill folds every old counter
// (and only raises), is idempotent, and reports ids whose keys it cannot map to one session;
// LiveOldLeases sees old leases only while they live.
func TestRealExecutorStandalone(t *testing.T) {
	srv := redistest.StartStandalone(t)
	c := srv.Client
	ctx := context.Background()
	ex, err := valkey.NewExecutor(c, fencing.Buzz)
	require.NoError(t, err)

	require.NoError(t, ex.Report(ctx, "p1", fencing.A))
	require.NoError(t, ex.Report(ctx, "p2", fencing.B))
	require.NoError(t, ex.Forget(ctx, "p2"))
	vs, err := ex.Versions(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]fencing.Version{"p1": fencing.A}, vs)

	set := func(k, v string) { require.NoError(t, c.Do(ctx, c.B().Set().Key(k).Value(v).Build()).Error()) }
	get := func(k string) string {
		v, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		require.NoError(t, err)
		return v
	}
	for i := range 25 {
		k := fencing.Buzz.Keys(fencing.Session{Community: "c", ID: fmt.Sprint(i)})
		set(k.OldGeneration, fmt.Sprint(10+i))
		if i%2 == 0 {
			set(k.NewGeneration, fmt.Sprint(20)) // ahead or equal for i ≤ 10: must not be lowered
		}
	}
	res, err := ex.Backfill(ctx)
	require.NoError(t, err)
	require.Equal(t, 25, res.Counters)
	require.Equal(t, 25-6, res.Raised) // i = 0, 2, 4, 6, 8, 10 already had 20 ≥ 10+i
	for i := range 25 {
		k := fencing.Buzz.Keys(fencing.Session{Community: "c", ID: fmt.Sprint(i)})
		want := 10 + i
		if i%2 == 0 && i <= 10 {
			want = 20
		}
		require.Equal(t, fmt.Sprint(want), get(k.NewGeneration), "session %d", i)
	}
	res, err = ex.Backfill(ctx)
	require.NoError(t, err)
	require.Equal(t, valkey.BackfillResult{Counters: 25}, res, "a second run changes nothing")

	amb := fencing.Buzz.Keys(fencing.Session{Community: "x:tunnel:y", ID: "z"})
	set(amb.OldGeneration, "3")
	_, err = ex.Backfill(ctx)
	require.ErrorIs(t, err, valkey.ErrAmbiguous)
	require.ErrorContains(t, err, amb.OldGeneration)

	d, err := valkey.NewDirectory(c, fencing.Buzz, fencing.A)
	require.NoError(t, err)
	s := fencing.Session{Community: "c", ID: "live"}
	r, err := d.Acquire(ctx, s, "p1", 150*time.Millisecond)
	require.NoError(t, err)
	require.True(t, r.OK)
	live, err := ex.LiveOldLeases(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{fencing.Buzz.Keys(s).OldLease}, live)
	require.Eventually(t, func() bool {
		live, err := ex.LiveOldLeases(ctx)
		return err == nil && len(live) == 0
	}, 2*time.Second, 20*time.Millisecond, "the old lease expires by its TTL")
}
