package driver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// BenchmarkPushParallel pushes a generation through the driver to N fake instances whose
// every call (Apply, then Observe) takes L = 20 ms, with snapshots saved to an in-memory
// store after every step. Reported:
//   - completion/L: wall time of the whole push over L. Each instance makes two calls in
//     sequence, so a parallel push takes about 2 whatever N is; one instance after another
//     would take 2N.
//   - vs_N=1: completion over the completion of a push to one instance, measured first in
//     the same run (run the sub-benchmarks together: -bench 'PushParallel').
//
// The last sub-benchmark is the baseline of the claim: the same push to 10 instances with
// every command executed one at a time (Kind.Ordered for all), which takes about 2N·L.
func BenchmarkPushParallel(b *testing.B) {
	const L = 20 * time.Millisecond
	var single time.Duration
	for _, bc := range []struct {
		n      int
		serial bool
	}{{1, false}, {10, false}, {100, false}, {1000, false}, {10, true}} {
		n := bc.n
		name := fmt.Sprintf("N=%d", n)
		if bc.serial {
			name = fmt.Sprintf("serial/N=%d", n)
		}
		b.Run(name, func(b *testing.B) {
			var total time.Duration
			runs := 0
			for b.Loop() {
				insts, _, ids := fakeInstances(n, L)
				exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: quiet}
				cfg := driver.Config[configpush.Input]{ID: "ns/app", Store: memstore.New(), Logger: quiet, Trace: machine.Discard}
				kind := driver.ConfigPush(exec, configpush.Options{})
				if bc.serial {
					kind.Ordered = func(configpush.Command) bool { return true }
				}
				start := time.Now()
				if err := driver.Run(context.Background(), kind, cfg, push(4, ids)); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				runs++
			}
			per := total / time.Duration(runs)
			b.ReportMetric(float64(per)/float64(L), "completion/L")
			if n == 1 {
				single = per
			} else if single > 0 {
				b.ReportMetric(float64(per)/float64(single), "vs_N=1")
			}
		})
	}
}
