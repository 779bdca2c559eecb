package driver_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// oneAtATime is a store that writes one blob at a time: the BlobBatcher of the store under
// it is hidden, so Run writes a step's snapshot and its exec entries as two writes.
type oneAtATime struct{ adapters.BlobStore }

// BenchmarkCutoverPauseDriver runs whole cutovers through Run and an Audited executor on the
// fake fleet (every command answers at once), so the pause window is the controller's own
// time: the machine's steps, the scheduling and the store writes of each step. Sub-benchmarks,
// measured in the same run (run them together: -bench CutoverPauseDriver):
//   - store=none: no snapshot store and no audit log, the same commands: the floor.
//   - store=bolt: snapshots and the audit log on bbolt (an fsync per transaction), as a
//     controller keeps them; a step's snapshot and exec entries in one transaction.
//   - store=bolt-two-writes: the same store written one blob at a time, so each step makes
//     two writes (at the same time; bbolt runs them one after the other).
//
// Reported: the pause window (median, p99, ms), its median over the floor's (x-floor), and
// the snapshot and audit writes' share of the window (save-median-ms), and the steps saved
// inside the window per pause (saves/pause), those of them that issued no command
// (saves-no-cmd/pause: a reply fed, nothing sent).
func BenchmarkCutoverPauseDriver(b *testing.B) {
	var floor time.Duration
	for _, store := range []string{"none", "bolt", "bolt-two-writes"} {
		b.Run("store="+store, func(b *testing.B) {
			var windows, saves []time.Duration
			var writes, idle int
			for b.Loop() {
				s := newCutoverSetup(b)
				tl := &driver.Timeline{}
				kind := driver.Cutover(s.exec)
				cfg := driver.Config[cutover.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard, Timeline: tl}
				if store != "none" {
					bs, err := boltstore.Open(filepath.Join(b.TempDir(), "loam.db"), nil)
					if err != nil {
						b.Fatal(err)
					}
					cfg.Store = bs
					if store == "bolt-two-writes" {
						cfg.Store = oneAtATime{bs}
					}
					tok := driver.Token{Holder: "bench", Epoch: 1}
					kind = driver.Cutover(&driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: s.exec,
						Audit: driver.NewAudit(cfg.Store, func() driver.Token { return tok }, quiet), Timeline: tl})
					b.Cleanup(func() { _ = bs.Close() })
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := driver.Run(ctx, kind, cfg, cutover.Input(s.start))
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				if d := <-s.done; d.Outcome != cutover.Finalized {
					b.Fatalf("outcome %s: %s", d.Outcome, d.Reason)
				}
				rep, ok := driver.CutoverPause(tl.Spans())
				if !ok {
					b.Fatal("no pause in the timeline")
				}
				windows = append(windows, rep.Window)
				for _, sp := range tl.Spans() {
					if sp.Kind == driver.SpanSave && !sp.Start.Before(rep.Start) && sp.Start.Before(rep.Start.Add(rep.Window)) {
						writes++
						if sp.N == 0 {
							idle++
						}
					}
				}
				saves = append(saves, rep.Costs.Save+rep.Costs.Audit)
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			med := nearestRank(windows, 0.5)
			b.ReportMetric(ms(med), "pause-median-ms")
			b.ReportMetric(ms(nearestRank(windows, 0.99)), "pause-p99-ms")
			b.ReportMetric(ms(nearestRank(saves, 0.5)), "save-median-ms")
			b.ReportMetric(float64(writes)/float64(len(windows)), "saves/pause")
			b.ReportMetric(float64(idle)/float64(len(windows)), "saves-no-cmd/pause")
			if store == "none" {
				floor = med
			} else if floor > 0 {
				b.ReportMetric(float64(med)/float64(floor), "x-floor")
			}
		})
	}
}

// nearestRank is the q-quantile of ds (nearest rank).
func nearestRank(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
