package indoubt_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestAlertStringListsItsParts: an alert's log line names each transaction's branches as
// shard:gid, separated by commas with none empty, so an operator reading the log finds
// every branch to resolve (make mutate: the separator's condition was checked by the golden
// scripts' text alone).
func TestAlertStringListsItsParts(t *testing.T) {
	a := indoubt.Alert{Step: "r1/alert/coordinator/7", ID: "coordinator/7", Reason: indoubt.ReasonGone, Txns: []indoubt.Txn{
		{Name: "__pgdog_2pc_7_1", Prepared: 5, Parts: []indoubt.Part{{Shard: "s0", GID: "__pgdog_2pc_7_1_0"}, {Shard: "s1", GID: "__pgdog_2pc_7_1_1"}}},
		{Name: "__pgdog_2pc_7_2", Prepared: 6, Parts: []indoubt.Part{{Shard: "s2", GID: "__pgdog_2pc_7_2_0"}}},
	}}
	line := a.String()
	var got [][]string
	for _, txn := range strings.Split(line, " txn=")[1:] {
		_, parts, ok := strings.Cut(strings.TrimSuffix(txn, ")"), "(")
		require.True(t, ok, "%q", line)
		got = append(got, strings.Split(parts, ","))
	}
	require.Equal(t, [][]string{{"s0:__pgdog_2pc_7_1_0", "s1:__pgdog_2pc_7_1_1"}, {"s2:__pgdog_2pc_7_2_0"}}, got, "%q", line)
}
