package fencemigrate_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// FuzzRestore: a snapshot blob of any content (the daemon reads it from the store) either
// is refused, or restores a machine whose snapshot restores again to the same state, and
// which stays restorable whatever inputs follow: every state the machine reaches from a
// snapshot it accepted is one it accepts.
func FuzzRestore(f *testing.F) {
	for _, s := range []fencemigrate.Snapshot{
		fencemigrate.New(fencemigrate.Config{}).Snapshot(),
		{Config: fencemigrate.Config{LeaseTTL: 30_000}, Allowed: fencing.B, Pods: map[string]fencing.Version{"p1": fencing.B}, Backfilled: true, ScanStep: "scan/3", Seq: 3},
		{Config: fencemigrate.Config{LeaseTTL: 1}, Allowed: fencing.C, Pods: map[string]fencing.Version{"p1": fencing.C}, Backfilled: true, Drained: true, ConfirmToken: "enable/4", Seq: 4},
	} {
		b, err := json.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(1))
	}
	f.Add([]byte(`{"Config":{"LeaseTTL":1},"Allowed":3,"Enabled":true}`), uint64(2))
	f.Add([]byte(`{"Config":{"LeaseTTL":-5}}`), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		var s fencemigrate.Snapshot
		if json.Unmarshal(data, &s) != nil {
			return
		}
		m, err := fencemigrate.Restore(s)
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		ctx := &machine.Ctx{Now: 1000, Rand: rng, Trace: machine.Discard}
		pods := []string{"p1", "p2"}
		for i := range 12 {
			var in fencemigrate.Input
			switch rng.IntN(9) {
			case 0:
				in = fencemigrate.PodReported{Pod: pods[rng.IntN(2)], Version: fencing.Version(rng.IntN(4))}
			case 1:
				in = fencemigrate.Advance{To: fencing.Version(rng.IntN(5))}
			case 2:
				in = fencemigrate.StartBackfill{}
			case 3:
				in = fencemigrate.BackfillDone{Step: m.Snapshot().BackfillStep}
			case 4:
				in = fencemigrate.OldLeasesScanned{Step: m.Snapshot().ScanStep}
			case 5:
				in = fencemigrate.RequestEnable{}
			case 6:
				in = fencemigrate.Confirm{Token: m.Snapshot().ConfirmToken}
			case 7:
				var err error
				if rng.IntN(2) == 0 {
					err = errors.New("failed")
				}
				in = fencemigrate.ClusterEnabled{Step: m.Snapshot().EnableStep, Err: err}
			default:
				in = fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: m.Snapshot().DrainTimer}}
			}
			ctx.Now += int64(i) * 1000
			m.On(ctx, in)
			if _, err := fencemigrate.Restore(m.Snapshot()); err != nil {
				t.Fatalf("after %T the machine's own snapshot is refused: %v (restored from %s)", in, err, data)
			}
		}
	})
}
