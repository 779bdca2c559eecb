package cutover_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

func ctxFor() *machine.Ctx { return &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 1))} }

// script records the inputs of one finalized cutover over n instances, answered by the
// world model, so a benchmark can replay them without the model's cost.
func script(n int) []cutover.Input {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("pgdog-%d", i+1))
	}
	w := newWorld(fixture(), names, names[0], 0)
	m := cutover.New()
	ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 1))}
	var ins []cutover.Input
	var pending []cutover.Command
	timers := map[string]int64{}
	feed := func(in cutover.Input) {
		ins = append(ins, in)
		for _, c := range m.On(ctx, in) {
			switch c := c.(type) {
			case cutover.SetTimer:
				timers[c.ID] = c.At
			case cutover.CancelTimer:
				delete(timers, c.ID)
			case cutover.Done, cutover.Alert:
			default:
				pending = append(pending, c)
			}
		}
	}
	feed(cutover.Start{Record: fixture(), Plan: cutover.Plan{Designated: names[0], Instances: names, Role: "app", Publication: "app_pub",
		Options: cutover.Options{FinalizeAfter: 1000, Grace: 1000}}})
	for {
		if _, done := m.Done(); done {
			return ins
		}
		if len(pending) > 0 {
			c := pending[0]
			pending = pending[1:]
			feed(w.apply(c, nil, false))
			continue
		}
		for id, at := range timers {
			delete(timers, id)
			ctx.Now = max(ctx.Now, at)
			feed(cutover.TimerFired{ID: id})
			break
		}
	}
}

// BenchmarkOn replays a whole finalized cutover and reports the cost of one On step
// (ns/step, allocs/step) next to the cost of the run (ns/op).
func BenchmarkOn(b *testing.B) {
	for _, n := range []int{3, 100} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			ins := script(n)
			ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 1)), Trace: machine.Discard}
			b.ReportAllocs()
			var allocs0, allocs1 uint64
			allocs0 = testingAllocs()
			b.ResetTimer()
			for b.Loop() {
				m := cutover.New()
				for _, in := range ins {
					m.On(ctx, in)
				}
			}
			b.StopTimer()
			allocs1 = testingAllocs()
			steps := float64(b.N) * float64(len(ins))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
			b.ReportMetric(float64(allocs1-allocs0)/steps, "allocs/step")
			b.ReportMetric(float64(len(ins)), "steps/run")
		})
	}
}

func testingAllocs() uint64 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.Mallocs
}
