package failover_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
)

// FuzzSnapshotJSON: decoding any bytes as a snapshot never panics; what decodes encodes
// back to the same JSON; and a snapshot Restore accepts never makes the machine panic.
func FuzzSnapshotJSON(f *testing.F) {
	for _, vitess := range []bool{false, true} {
		rec, shard, promoted := pgFixture()
		if vitess {
			rec, shard, promoted = vtFixture()
		}
		w := newWorld(rec, shard, promoted, 3)
		m := failover.New()
		ctx := &machine.Ctx{Now: 1000}
		in := failover.Input(failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app"})
		for range 6 {
			cmds := m.On(ctx, in)
			b, err := json.Marshal(m.Snapshot())
			require.NoError(f, err)
			f.Add(b)
			if len(cmds) == 0 {
				break
			}
			if in = w.apply(cmds[0], nil, false); in == nil {
				break
			}
		}
	}
	f.Add([]byte(`{"Stage":3,"Sent":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s failover.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		b1, err := json.Marshal(s)
		if err != nil {
			return // a record that decodes but does not encode (an enum out of range)
		}
		var s2 failover.Snapshot
		require.NoError(t, json.Unmarshal(b1, &s2))
		b2, err := json.Marshal(s2)
		require.NoError(t, err)
		require.JSONEq(t, string(b1), string(b2))
		if m, err := failover.Restore(s); err == nil {
			ctx := &machine.Ctx{Now: 5000}
			m.On(ctx, failover.Restarted{})
			m.On(ctx, failover.Reply{Step: "app/s1/4/fence", Attempt: 1})
			m.On(ctx, failover.RecordWritten{Step: "app/s1/4/repoint@30", Attempt: 1, Version: 31})
		}
	})
}
