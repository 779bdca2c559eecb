package configpush_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// FuzzRestore: whatever bytes a snapshot blob holds, decoding and restoring either fails
// with an error or gives a machine that takes a restart, timers and replies without
// panicking: a corrupted blob must stop a driver with an error, never crash it.
func FuzzRestore(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"database":"app","written":3,"push":{"gen":4,"version":7,"files":[{"Name":"pgdog.toml","Data":"eA=="}],"files_step":{"state":"done","attempt":1,"limit":5},"instances":[{"id":"a","stage":"observe","reload":{"state":"done","attempt":1,"limit":5},"observe":{"state":"awaiting","attempt":1,"limit":5,"at":11000}}]}}`))
	f.Add([]byte(`{"stray":{"gen":3,"step":"g3/files","attempt":1,"at":5},"push":{"gen":4,"files_step":{"state":"queued"},"instances":[{"id":"a","stage":"files"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s configpush.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		m, err := configpush.Restore(s, configpush.Options{})
		if err != nil {
			return
		}
		ctx := &machine.Ctx{Now: 20000, Rand: rand.New(rand.NewChaCha8([32]byte{})), Trace: machine.Discard}
		m.On(ctx, configpush.Restarted{})
		for _, id := range []string{"g4/files", "g3/files", "g4/instance/a"} {
			m.On(ctx, configpush.TimerFired{ID: id})
		}
		m.On(ctx, configpush.FilesWritten{Step: "g4/files", Attempt: 1})
		m.On(ctx, configpush.Reloaded{Step: "g4/reload/a", Attempt: 1, Instance: "a", Err: errors.New("x")})
		m.On(ctx, configpush.Observed{Step: "g4/observe/a", Attempt: 1, Instance: "a", Generation: 4, Known: true})
	})
}
