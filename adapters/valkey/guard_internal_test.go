package valkey

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// TestRealCrossSlotGuardInsteadOfPanic: a cross-slot script call on a cluster client returns
// ErrCrossSlot; without the guard valkey-go panics (shown, and recovered, below).
func TestRealCrossSlotGuardInsteadOfPanic(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cl := c.Client(t)
	d, err := NewDirectory(cl, fencing.Buzz, fencing.C)
	require.NoError(t, err)
	k := fencing.Buzz.Keys(fencing.Session{Community: "acme", ID: "sess42"})
	_, err = d.exec(context.Background(), "probe", lua.acquire[fencing.O], []string{k.OldLease, k.OldGeneration}, []string{"p", "1000"})
	require.ErrorIs(t, err, ErrCrossSlot)
	require.ErrorContains(t, err, "slot 14521")
	require.Panics(t, func() {
		lua.acquire[fencing.O].Exec(context.Background(), cl, []string{k.OldLease, k.OldGeneration}, []string{"p", "1000"})
	}, "valkey-go is expected to panic on cross-slot keys; if it stops, the guard is still right but this note is stale")
	var _ valkeygo.Client = cl
}

func TestSameSlot(t *testing.T) {
	k := fencing.Buzz.Keys(fencing.Session{Community: "a", ID: "b"})
	require.NoError(t, sameSlot([]string{k.NewLease, k.NewGeneration}))
	require.ErrorIs(t, sameSlot([]string{k.OldLease, k.OldGeneration}), ErrCrossSlot)
	require.ErrorIs(t, sameSlot([]string{k.NewLease, k.NewGeneration, k.OldLease}), ErrCrossSlot)
}
