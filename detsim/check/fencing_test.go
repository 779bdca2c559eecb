package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/fencing"
)

var fsess = fencing.Session{Community: "acme", ID: "s1"}

// TestFencingCheckers: each theorem's checker names its invariant on the state or history
// that breaks it, and passes the protocol's own.
func TestFencingCheckers(t *testing.T) {
	v := model.NewValkey(nil, "valkey", fencing.Buzz, []fencing.Session{fsess})
	acquire := func(pod string, ver fencing.Version) fencing.Reply {
		r, err := v.Script(pod, fsess, fencing.Call{Version: ver, Op: fencing.Acquire, Owner: pod, TTL: 100})
		require.NoError(t, err)
		return r
	}
	require.True(t, acquire("p1", fencing.O).OK)
	require.Nil(t, check.SingleAuthority(v, 0))
	require.NotNil(t, check.OneWayDoor(v, 0), "an old lease is live")
	require.Equal(t, check.InvT3, check.OneWayDoor(v, 0).Invariant)
	require.False(t, acquire("p2", fencing.A).OK, "A sees the old lease")
	require.Nil(t, check.FencingHistory(v.History, 0))

	// C ignores the old keys: two owners, and generation 1 again (no backfill).
	require.True(t, acquire("p3", fencing.C).OK)
	got := check.SingleAuthority(v, 0)
	require.NotNil(t, got)
	require.Equal(t, check.InvT1, got.Invariant)
	got = check.FencingHistory(v.History, 0)
	require.NotNil(t, got)
	require.Equal(t, check.InvT2, got.Invariant)
}
