package scenario_test

import (
	"testing"
	"time"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
)

// benchScenario runs one seed per iteration and reports what the figures need: wall time
// per seed (ns/op), steps per seed, time per step, and seeds per second on one core.
func benchScenario(b *testing.B, sc detsim.Scenario) {
	b.ReportAllocs()
	steps := 0
	start := time.Now()
	seed := uint64(1)
	for b.Loop() {
		r := sc.Run(seed, detsim.RunOptions{})
		if r.Violation != nil {
			b.Fatalf("seed %d: %v", seed, r.Violation)
		}
		steps += r.Steps
		seed++
	}
	el := time.Since(start)
	n := float64(seed - 1)
	b.ReportMetric(float64(steps)/n, "steps/seed")
	b.ReportMetric(float64(el.Nanoseconds())/float64(steps), "ns/step")
	b.ReportMetric(n/el.Seconds(), "seeds/s")
}

func BenchmarkTraffic(b *testing.B) { benchScenario(b, scenario.Traffic) }
func BenchmarkBank(b *testing.B)    { benchScenario(b, scenario.Bank) }
