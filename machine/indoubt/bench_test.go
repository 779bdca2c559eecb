package indoubt_test

import (
	"fmt"
	"testing"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// BenchmarkOn measures one On step, averaged over the steps of a steady-state round: the
// round timer, one Prepared per shard (each with 20 prepared transactions, a quarter of
// them in doubt under a gone coordinator), and the Roster that closes the round and
// re-evaluates the alerts (unchanged, so nothing is re-issued).
func BenchmarkOn(b *testing.B) {
	for _, shards := range []int{4, 32} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			m := indoubt.New(indoubt.Options{Deployment: "prod-app"})
			ctx := &machine.Ctx{Now: 1_000_000, Trace: machine.Discard}
			names := make([]string, shards)
			for i := range names {
				names[i] = fmt.Sprintf("s%d", i)
			}
			xacts := func(shard int) []indoubt.Xact {
				var xs []indoubt.Xact
				for j := range 20 {
					xs = append(xs, indoubt.Xact{GID: fmt.Sprintf("__pgdog_2pc_prod-app_%d_%d_%d", j%4, j, shard), Prepared: 1000})
				}
				return xs
			}
			replies := make([][]indoubt.Xact, shards)
			for i := range replies {
				replies[i] = xacts(i)
			}
			procs := []indoubt.Process{{ID: "0", Started: 1}, {ID: "1", Started: 1}, {ID: "2", Started: 1}}
			round := func() []indoubt.Input {
				r := m.Snapshot().Round
				in := make([]indoubt.Input, 0, shards+1)
				for i, n := range names {
					in = append(in, indoubt.Prepared{Step: fmt.Sprintf("r%d/prepared/%s", r, n), Shard: n, Xacts: replies[i]})
				}
				return append(in, indoubt.Roster{Step: fmt.Sprintf("r%d/roster", r), Processes: procs})
			}
			m.On(ctx, indoubt.Track{Shards: names})
			for _, in := range round() { // the first round raises the alerts; the sink takes them
				for _, c := range m.On(ctx, in) {
					if a, ok := c.(indoubt.Alert); ok {
						m.On(ctx, indoubt.Delivered{Step: a.Step})
					}
				}
			}
			if len(m.Snapshot().Alerts) == 0 || len(m.Snapshot().Outbox) != 0 {
				b.Fatal("the setup did not raise and deliver the alerts")
			}
			var script []indoubt.Input
			b.ReportAllocs()
			for b.Loop() {
				if len(script) == 0 {
					b.StopTimer()
					ctx.Now += 30_000
					m.On(ctx, indoubt.TimerFired{ID: indoubt.RoundTimer})
					script = round()
					b.StartTimer()
				}
				m.On(ctx, script[0])
				script = script[1:]
			}
		})
	}
}
