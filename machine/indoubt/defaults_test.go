package indoubt_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestZeroOptionsTakeTheDefaults: a monitor configured with nothing but its deployment
// rounds every 30 s, alerts a branch only once it is 5 minutes old, and alerts a shard
// unscanned on its 3rd failed scan, not before (found by make mutate: a default applied to
// a negative value only, or to a set one, kept every property green, and a zero threshold
// is an alert on every branch PgDog is still committing).
func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	f := newFixture(indoubt.Options{Deployment: "prod-app"}, 10_000_000)
	young, old := "app_xa_1_0", "app_xa_2_0"
	xacts := []indoubt.Xact{
		{GID: old, Prepared: 10_000_000 - (5*time.Minute + time.Second).Milliseconds()},
		{GID: young, Prepared: 10_000_000 - (4 * time.Minute).Milliseconds()},
	}
	round := func(fail bool) { f.round(xacts, nil, fail) }
	round(false)
	round(false)
	require.Equal(t, int64(30_000), f.timer-f.now, "the round period defaults to 30 s")
	require.NotEmpty(t, f.alerts, "a branch 5 min 1 s old is past the default threshold")
	for _, a := range f.alerts {
		for _, tx := range a.Txns {
			require.NotEqual(t, young, tx.Name, "a branch 4 minutes old is under the default threshold of 5 minutes: %+v", a)
		}
	}
	raised := func() bool { _, ok := f.raised["unscanned/s0"]; return ok }
	round(true)
	round(true)
	require.False(t, raised(), "unscanned after 2 failed scans; BlindAfter defaults to 3")
	round(true)
	require.True(t, raised(), "not unscanned after 3 failed scans (BlindAfter's default)")
}
