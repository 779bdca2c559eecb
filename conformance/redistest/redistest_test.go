package redistest_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// TestRealStandaloneStopsInCleanup: the node answers, has cluster mode disabled, and its
// process is gone once the test that started it has finished.
func TestRealStandaloneStopsInCleanup(t *testing.T) {
	var pid int
	t.Run("inner", func(t *testing.T) {
		s := redistest.StartStandalone(t)
		info, err := s.Do(context.Background(), "INFO", "server").ToString()
		require.NoError(t, err)
		require.Contains(t, info, "redis_mode:standalone")
		i := strings.Index(info, "process_id:")
		require.GreaterOrEqual(t, i, 0)
		pid, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(info[i+len("process_id:"):], "\r", 2)[0]))
		require.NoError(t, err)
		require.NoError(t, syscall.Kill(pid, 0), "server process must be alive during the test")
	})
	if pid != 0 {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "server process must be gone after cleanup")
	}
}

// TestRealClusterSlotsAndMove: three primaries own all slots; the kernel's Slot agrees with
// CLUSTER KEYSLOT on keys of every shape; a moved slot is answered with MOVED by its old owner.
func TestRealClusterSlotsAndMove(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	epochs := func() (mine []int) {
		for _, s := range c.Nodes {
			info, err := s.Do(ctx, "CLUSTER", "INFO").ToString()
			require.NoError(t, err)
			_, v, _ := strings.Cut(info, "cluster_my_epoch:")
			e, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(v, "\r", 2)[0]))
			require.NoError(t, err, "cluster_my_epoch in %q", info)
			mine = append(mine, e)
		}
		return mine
	}
	// Equal config epochs would let a stale claim of a moved slot's old owner outrank the new
	// owner, which then drops the moved keys (seen: the GET below answered nil).
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(epochs()))), 3, "distinct config epochs")
	n := c.Nodes[0]
	for i := range 300 {
		key := strconv.Itoa(i)
		switch i % 4 {
		case 1:
			key = "buzz:tunnel:{acme:s" + key + "}:lease"
		case 2:
			key = "{}x" + key
		case 3:
			key = "a{b}" + key + "}{c"
		}
		got, err := n.Do(ctx, "CLUSTER", "KEYSLOT", key).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(fencing.Slot(key)), got, "slot of %q", key)
	}
	key := "buzz:tunnel:{acme:sess42}:lease"
	slot := fencing.Slot(key)
	cl := c.Client(t)
	require.NoError(t, cl.Do(ctx, cl.B().Set().Key(key).Value("v").Build()).Error())
	from := c.Owner(slot)
	to := (c.Primary(from) + 1) % 3
	require.NoError(t, c.MoveSlot(ctx, slot, to, redistest.MoveAll))
	err := from.Do(ctx, "GET", key).Error()
	ve, ok := valkeygo.IsValkeyErr(err)
	require.True(t, ok, "%v", err)
	addr, moved := ve.IsMoved()
	require.True(t, moved, "%v", err)
	require.Equal(t, c.Nodes[to].Addr, addr)
	after := epochs()
	require.Equal(t, slices.Max(after), after[to], "the new owner holds the greatest config epoch: %v", after)
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(after))), 3, "distinct config epochs: %v", after)
	v, err := c.Nodes[to].Do(ctx, "GET", key).ToString()
	require.NoError(t, err)
	require.Equal(t, "v", v, "the key moved with its slot")
}
