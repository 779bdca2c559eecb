package cutover_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// TestStartRefusesAttemptMark: a shard named with '#' could be taken for another
// shard's retry in step ids ("fence/s1#2"), so Start refuses it before touching anything.
func TestStartRefusesAttemptMark(t *testing.T) {
	rec := fixture()
	rec.Target.Shards[1].Name = "n0#2"
	require.NoError(t, rec.Validate(), "the record itself is valid")
	cmds := cutover.New().On(&machine.Ctx{Now: 1, Trace: machine.Discard}, cutover.Start{Record: rec, Plan: cutover.Plan{
		Designated: "pgdog-1", Instances: []string{"pgdog-1"}, Role: "app", Publication: "app_pub"}})
	require.Len(t, cmds, 1)
	done, ok := cmds[0].(cutover.Done)
	require.True(t, ok, "%v", cmds[0])
	require.Equal(t, cutover.Aborted, done.Outcome)
	require.Contains(t, done.Reason, `shard name "n0#2" contains '#'`)
}
