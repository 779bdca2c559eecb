package scenario_test

import (
	"slices"
	"testing"
	"time"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// bareStepNs measures, in the same run, what one scheduler step costs with nothing in it:
// schedule an event with a label, pop it, hash its line. It is the baseline the scenario
// benchmarks report their cost per step against.
func bareStepNs() float64 {
	s := detsim.New(detsim.Config{Seed: 1})
	const n = 200_000
	l := detsim.Label{Kind: "deliver", From: "pgdog-0", To: "shard-1", What: "exec"}
	start := time.Now()
	for i := range n {
		s.After(1, l, func() {})
		if i%64 == 63 {
			s.Run(1<<62, 64)
		}
	}
	s.Run(1<<62, n)
	return float64(time.Since(start).Nanoseconds()) / n
}

// benchScenario runs one seed per iteration and reports what the figures need: the median
// wall time per seed, steps per seed, time per step and its ratio to a bare scheduler step
// measured in the same run, and seeds per second on one core.
func benchScenario(b *testing.B, sc detsim.Scenario) {
	b.ReportAllocs()
	bare := bareStepNs()
	steps := 0
	var per []time.Duration
	seed := uint64(1)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		r := sc.Run(seed, detsim.RunOptions{})
		per = append(per, time.Since(t0))
		if r.Violation != nil {
			b.Fatalf("seed %d: %v", seed, r.Violation)
		}
		steps += r.Steps
		seed++
	}
	el := time.Since(start)
	n := float64(seed - 1)
	slices.Sort(per)
	stepNs := float64(el.Nanoseconds()) / float64(steps)
	b.ReportMetric(float64(per[len(per)/2].Microseconds())/1000, "median-ms/seed")
	b.ReportMetric(float64(steps)/n, "steps/seed")
	b.ReportMetric(stepNs, "ns/step")
	b.ReportMetric(stepNs/bare, "x-bare-step")
	b.ReportMetric(n/el.Seconds(), "seeds/s")
}

func BenchmarkTraffic(b *testing.B) { benchScenario(b, scenario.Traffic) }
func BenchmarkBank(b *testing.B)    { benchScenario(b, scenario.Bank) }
func BenchmarkPush(b *testing.B)    { benchScenario(b, scenario.Push) }

// BenchmarkCutover is the figure the design asks for: a cutover under traffic, about 470
// scheduled events per seed (median-ms/seed is the wall time per seed; seeds/s is per core).
func BenchmarkCutover(b *testing.B) { benchScenario(b, scenario.Cutover) }
