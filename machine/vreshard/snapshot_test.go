package vreshard_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/vreshard"
)

// TestRestoreRefusesInconsistentSnapshots: a snapshot no machine could have written (a
// damaged blob, or one written by hand) is refused, instead of resuming a reshard from a
// stage that does not exist, a record write with no record, a VDiff with no id or a start
// that would have been refused (make mutate: Check's cases were run by no test with a bad
// snapshot). The stage numbers are the snapshot's: 1 Inspect, 3 the record write, 6 VDiff,
// 14 done, 16 one past the last.
func TestRestoreRefusesInconsistentSnapshots(t *testing.T) {
	d := newDriver(t, newWorld(fixture().Record), fixture()) // at the Inspect, sent
	b, err := json.Marshal(d.m.Snapshot())
	require.NoError(t, err)
	restore := func(edit func(map[string]any)) error {
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		edit(m)
		e, err := json.Marshal(m)
		require.NoError(t, err)
		var s vreshard.Snapshot
		require.NoError(t, json.Unmarshal(e, &s))
		_, err = vreshard.Restore(s)
		return err
	}
	set := func(kv ...any) func(map[string]any) {
		return func(m map[string]any) {
			for i := 0; i < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
		}
	}
	require.NoError(t, restore(set()), "the machine's own snapshot")
	for name, edit := range map[string]func(map[string]any){
		"stage past the last":         set("Stage", 16),
		"after past the last":         set("After", 16),
		"started without a record":    set("Rec", nil),
		"done, no record, no refusal": set("Stage", 14, "Outcome", 1, "Rec", nil),
		"record write without one":    set("Stage", 3, "Next", nil),
		"VDiff without its id":        set("Stage", 6, "UUID", ""),
		"start that is refused":       func(m map[string]any) { m["Start"].(map[string]any)["Cell"] = "" },
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorContains(t, restore(edit), "vreshard: restore")
		})
	}
}
