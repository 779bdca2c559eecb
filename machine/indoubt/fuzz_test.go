package indoubt_test

import (
	"encoding/json"
	"testing"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// FuzzRestore: whatever bytes a snapshot blob holds, decoding and restoring either fails
// with an error or gives a monitor that takes a restart, a round and replies without
// panicking.
func FuzzRestore(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"round":3,"open":true,"next":5000,"shards":[{"name":"s0","awaiting":true,"scanned":true,"xacts":[{"gid":"__pgdog_2pc_a_1_0","prepared":1,"first_seen":1}]}],"roster":{"awaiting":true},"alerts":[{"step":"r2/alert/coordinator/a","id":"coordinator/a","reason":"gone","since":1}],"outbox":[{"id":"coordinator/a","step":"r2/alert/coordinator/a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s indoubt.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		m, err := indoubt.Restore(s, indoubt.Options{})
		if err != nil {
			return
		}
		ctx := &machine.Ctx{Now: 1_000_000, Trace: machine.Discard}
		m.On(ctx, indoubt.Restarted{})
		m.On(ctx, indoubt.Prepared{Step: "r4/prepared/s0", Shard: "s0", Xacts: []indoubt.Xact{{GID: "__pgdog_2pc_a_1_0", Prepared: 1}}})
		m.On(ctx, indoubt.Roster{Step: "r4/roster"})
		m.On(ctx, indoubt.Delivered{Step: "r2/alert/coordinator/a"})
		ctx.Now += 3_600_000
		m.On(ctx, indoubt.TimerFired{ID: indoubt.RoundTimer})
		m.On(ctx, indoubt.Track{Shards: []string{"s0", "s1"}})
	})
}
