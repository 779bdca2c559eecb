package indoubt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// TestZeroOptionsTakeTheDefaults: a monitor configured with nothing but its deployment
// rounds every 30 s, alerts a branch only once it is 5 minutes old, and alerts a shard
// unscanned on its 3rd failed scan, not before (found by make mutate: a default applied to
// a negative value only, or to a set one, kept every property green, and a zero threshold
// is an alert on every branch PgDog is still committing).
func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	m := indoubt.New(indoubt.Options{Deployment: "prod-app"})
	now := int64(10_000_000)
	var timer int64
	var alerts []indoubt.Alert
	young, old := "app_xa_1_0", "app_xa_2_0"
	round := func(fail bool) {
		var pending []indoubt.Command
		feed := func(in indoubt.Input) {
			for _, c := range m.On(&machine.Ctx{Now: now}, in) {
				switch c := c.(type) {
				case indoubt.SetTimer:
					timer = c.At
				case indoubt.Alert:
					alerts = append(alerts, c)
					pending = append(pending, c)
				default:
					pending = append(pending, c)
				}
			}
		}
		if timer == 0 {
			feed(indoubt.Track{Shards: []string{"s0"}})
		} else {
			now = max(now, timer)
			feed(indoubt.TimerFired{ID: indoubt.RoundTimer})
		}
		for len(pending) > 0 {
			c := pending[0]
			pending = pending[1:]
			switch c := c.(type) {
			case indoubt.ListPrepared:
				p := indoubt.Prepared{Step: c.Step, Shard: c.Shard}
				if fail {
					p.Err = errors.New("unreachable")
				} else {
					p.Xacts = []indoubt.Xact{
						{GID: old, Prepared: 10_000_000 - (5*time.Minute + time.Second).Milliseconds()},
						{GID: young, Prepared: 10_000_000 - (4 * time.Minute).Milliseconds()},
					}
				}
				feed(p)
			case indoubt.ListInstances:
				feed(indoubt.Roster{Step: c.Step})
			case indoubt.Alert:
				feed(indoubt.Delivered{Step: c.Step})
			case indoubt.ClearAlert:
				feed(indoubt.Delivered{Step: c.Step})
			}
		}
	}
	round(false)
	round(false)
	require.Equal(t, int64(30_000), timer-now, "the round period defaults to 30 s")
	require.NotEmpty(t, alerts, "a branch 5 min 1 s old is past the default threshold")
	for _, a := range alerts {
		for _, tx := range a.Txns {
			require.NotEqual(t, young, tx.Name, "a branch 4 minutes old is under the default threshold of 5 minutes: %+v", a)
		}
	}
	raised := func() bool {
		for _, a := range alerts {
			if a.ID == "unscanned/s0" {
				return true
			}
		}
		return false
	}
	round(true)
	round(true)
	require.False(t, raised(), "unscanned after 2 failed scans; BlindAfter defaults to 3")
	round(true)
	require.True(t, raised(), "not unscanned after 3 failed scans (BlindAfter's default)")
}
