package driver_test

import (
	"fmt"
	"time"

	"loam.dev/router/driver"
)

// CutoverPause reads a cutover's write pause out of a Timeline: here a hand-made one,
// where the second Pause fails, its retry waits 50ms on a timer, and each step's snapshot
// save takes 2ms. The driver records the same spans when Config.Timeline is set.
func ExampleCutoverPause() {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	tl := &driver.Timeline{}
	for _, s := range []driver.Span{
		{Kind: driver.SpanExec, Step: "app/2/pause/ref-1", Target: "ref-1", Result: "ok", Start: at(0), End: at(1)},
		{Kind: driver.SpanExec, Step: "app/2/pause/ref-2", Target: "ref-2", Result: "unreachable", Start: at(0), End: at(1)},
		{Kind: driver.SpanSave, Start: at(1), End: at(3)},
		{Kind: driver.SpanTimer, Step: "retry/app/2/pause/ref-2", Start: at(3), End: at(53)},
		{Kind: driver.SpanSave, Start: at(53), End: at(55)},
		{Kind: driver.SpanExec, Step: "app/2/pause/ref-2#2", Target: "ref-2", Result: "ok", Start: at(55), End: at(56)},
		{Kind: driver.SpanSave, Start: at(56), End: at(58)},
		{Kind: driver.SpanExec, Step: "app/2/fence/s0", Target: "s0", Result: "ok", Start: at(58), End: at(158)},
		{Kind: driver.SpanSave, Start: at(158), End: at(160)},
		{Kind: driver.SpanExec, Step: "app/2/resume/ref-1", Target: "ref-1", Result: "ok", Start: at(160), End: at(161)},
		{Kind: driver.SpanExec, Step: "app/2/resume/ref-2", Target: "ref-2", Result: "ok", Start: at(160), End: at(162)},
	} {
		tl.Add(s)
	}
	rep, _ := driver.CutoverPause(tl.Spans())
	fmt.Print(rep)
	// Output:
	// pause window 162.0ms: commands 104.0ms, controller 58.0ms (audit 0.0ms, save 8.0ms, wait 50.0ms, feed 0.0ms, other 0.0ms)
	//   pause @0.0ms: wall 58.0ms, commands 2.0ms, controller 56.0ms (audit 0.0ms, save 6.0ms, wait 50.0ms, feed 0.0ms, other 0.0ms)
	//       @0.0ms ref-1 1.0ms
	//       @0.0ms ref-2 1.0ms failed: unreachable
	//       @55.0ms ref-2 1.0ms
	//   fence @58.0ms: wall 102.0ms, commands 100.0ms, controller 2.0ms (audit 0.0ms, save 2.0ms, wait 0.0ms, feed 0.0ms, other 0.0ms)
	//       @58.0ms s0 100.0ms
	//   resume @160.0ms: wall 2.0ms, commands 2.0ms, controller 0.0ms (audit 0.0ms, save 0.0ms, wait 0.0ms, feed 0.0ms, other 0.0ms)
	//       @160.0ms ref-1 1.0ms
	//       @160.0ms ref-2 2.0ms
}
