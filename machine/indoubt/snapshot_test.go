package indoubt_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestRestoreRefusesInconsistentSnapshots: a snapshot no monitor could have produced is
// refused with the field named.
func TestRestoreRefusesInconsistentSnapshots(t *testing.T) {
	good := func() indoubt.Snapshot {
		return indoubt.Snapshot{Round: 3, Open: true, Next: 5000,
			Shards: []indoubt.Shard{{Name: "s0", Awaiting: true}, {Name: "s1"}},
			Roster: indoubt.Roll{Processes: []indoubt.Process{{ID: "0"}, {ID: "1"}}},
			Alerts: []indoubt.Alert{{Step: "r2/alert/coordinator/2", ID: "coordinator/2", Reason: indoubt.ReasonGone}, {ID: "unscanned/s1", Reason: indoubt.ReasonUnscanned}},
			Outbox: []indoubt.Delivery{{ID: "coordinator/2", Step: "r2/alert/coordinator/2"}, {ID: "gone/x", Step: "r3/clear/gone/x", Clear: true}}}
	}
	_, err := indoubt.Restore(good(), indoubt.Options{})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		edit func(*indoubt.Snapshot)
		want string
	}{
		"unsorted shards":  {func(s *indoubt.Snapshot) { s.Shards[0].Name = "z" }, "not sorted"},
		"repeated shard":   {func(s *indoubt.Snapshot) { s.Shards[1].Name = "s0" }, "empty or repeated"},
		"awaiting, closed": {func(s *indoubt.Snapshot) { s.Open = false }, "no round is open"},
		"unsorted roster":  {func(s *indoubt.Snapshot) { s.Roster.Processes[0].ID = "9" }, "roster.processes"},
		"unsorted alerts":  {func(s *indoubt.Snapshot) { s.Alerts[0].ID = "zz" }, "alerts are not sorted"},
		"unknown reason":   {func(s *indoubt.Snapshot) { s.Alerts[0].Reason = "bored" }, `unknown reason "bored"`},
	} {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc.edit(&s)
			_, err := indoubt.Restore(s, indoubt.Options{})
			require.ErrorContains(t, err, "indoubt: cannot restore")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
