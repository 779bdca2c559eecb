package failover_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
)

// BenchmarkOn replays a whole PgDog failover (start, fence, repoint, push) and reports the
// cost of one On step.
func BenchmarkOn(b *testing.B) {
	rec, shard, promoted := pgFixture()
	w := newWorld(rec, shard, promoted, 3)
	ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 1)), Trace: machine.Discard}
	ins := []failover.Input{failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app"}}
	m := failover.New()
	for len(ins) < 10 {
		cmds := m.On(ctx, ins[len(ins)-1])
		if len(cmds) == 0 {
			break
		}
		if in := w.apply(cmds[0], nil, false); in != nil {
			ins = append(ins, in)
		} else {
			break
		}
	}
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for b.Loop() {
		m := failover.New()
		for _, in := range ins {
			m.On(ctx, in)
		}
	}
	runtime.ReadMemStats(&ms1)
	steps := float64(b.N) * float64(len(ins))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/steps, "allocs/step")
	b.ReportMetric(float64(len(ins)), "steps/run")
}
