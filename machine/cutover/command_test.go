package cutover_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// TestCutoverString: a Cutover's log line names its drain, shard:slot for each shard in
// order, comma-separated, and says nothing of a drain when it has none (SkipDrain, or a
// Cutover from before the drain existed).
func TestCutoverString(t *testing.T) {
	be := shardmap.Backend{Host: "10.0.1.1", Port: 5432, Database: "app"}
	c := cutover.Cutover{Step: "app/4/cutover/pgdog-1", Instance: "pgdog-1", Task: 7}
	require.Equal(t, "Cutover step=app/4/cutover/pgdog-1 instance=pgdog-1 task=7", c.String())
	c.Drain = []cutover.SlotDrain{{Shard: "s0", Backend: be, Slot: "loam_app_4"}}
	require.Equal(t, "Cutover step=app/4/cutover/pgdog-1 instance=pgdog-1 task=7 drain=s0:loam_app_4", c.String())
	c.Drain = append(c.Drain, cutover.SlotDrain{Shard: "s1", Backend: be, Slot: "loam_app_4"}, cutover.SlotDrain{Shard: "s2", Backend: be, Slot: "loam_app_4"})
	require.Equal(t, "Cutover step=app/4/cutover/pgdog-1 instance=pgdog-1 task=7 drain=s0:loam_app_4,s1:loam_app_4,s2:loam_app_4", c.String())
}
