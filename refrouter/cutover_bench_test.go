package refrouter_test

import (
	"strconv"
	"testing"
	"time"

	"loam.dev/router/machine/cutover"
)

// benchRuns numbers the benchmark's cutover databases apart from the tests' (app<n>).
var benchRuns = 1000

// pauseAt3 is the median pause window of BenchmarkCutoverPause/instances=3 in this run,
// which instances=32 is measured against.
var pauseAt3 time.Duration

// BenchmarkCutoverPause runs the forward cutover of TestRealCutoverFigures (real Postgres,
// eight writers, ref-3 unreachable) b.N times at 3 and at 32 reference-router instances,
// and reports the pause window (median and p99, ms), the controller's share of it (the
// window minus the time at least one command was executing: what the driver adds), the
// window against its own floor measured in the same run (x-floor: window / command time),
// the longest write a paused client saw, and at 32 instances the window against the 3
// instances' of the same run (x-vs-3). Run it with -benchtime=20x -run '^$'.
func BenchmarkCutoverPause(b *testing.B) {
	for _, n := range []int{3, 32} {
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			servers := startCutoverServers(b)
			var windows, ctl, cmds, stalls []time.Duration
			for b.Loop() {
				benchRuns++
				r := newCutoverRunOf(b, servers, benchRuns, forward, false, n, true)
				o := r.drive(time.Second)
				if o.done.Outcome != cutover.Finalized {
					b.Fatalf("outcome %s: %s", o.done.Outcome, o.done.Reason)
				}
				windows = append(windows, o.pauseWindow)
				ctl = append(ctl, o.pause.Controller)
				cmds = append(cmds, o.pause.Commands)
				stalls = append(stalls, o.stall)
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			med := quantile(windows, 0.5)
			b.ReportMetric(ms(med), "pause-median-ms")
			b.ReportMetric(ms(quantile(windows, 0.99)), "pause-p99-ms")
			b.ReportMetric(ms(quantile(ctl, 0.5)), "controller-median-ms")
			b.ReportMetric(ms(quantile(ctl, 0.99)), "controller-p99-ms")
			b.ReportMetric(float64(med)/float64(max(quantile(cmds, 0.5), time.Microsecond)), "x-floor")
			b.ReportMetric(ms(quantile(stalls, 1)), "stall-max-ms")
			if l, err := strconv.ParseFloat(loadAverage(), 64); err == nil {
				b.ReportMetric(l, "load1")
			}
			if n == 3 {
				pauseAt3 = med
			} else if pauseAt3 > 0 {
				b.ReportMetric(float64(med)/float64(pauseAt3), "x-vs-3")
			}
		})
	}
}
