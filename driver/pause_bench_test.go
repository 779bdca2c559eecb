package driver_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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

// pauseStores are the ways BenchmarkCutoverPauseDriver keeps a cutover's snapshots and
// audit log.
var pauseStores = []string{"none", "bolt", "bolt-two-writes"}

// BenchmarkCutoverPauseDriver runs whole cutovers through Run and an Audited executor on the
// fake fleet (every command answers at once), so the pause window is the controller's own
// time: the machine's steps, the scheduling and the store writes of each step. Each
// iteration runs the same cutover once each way, in turn, so all three see the same load:
//   - none: no snapshot store and no audit log, the same commands: the floor.
//   - bolt: snapshots and the audit log on bbolt (an fsync per transaction), as a
//     controller keeps them; a step's snapshot and exec entries in one transaction.
//   - bolt-two-writes: the same store written one blob at a time, so a step with commands
//     makes two writes (at the same time; bbolt runs them one after the other).
//
// Reported per way: the pause window's median and p99 (ms), the median over the floor's
// (x-floor), the median time the window spent in store writes (write-median-ms), the store
// writes inside the window per pause (writes/pause) and, of the snapshot saves, those of
// steps that issued no command (no-cmd-saves/pause: a reply fed, nothing sent), the result
// and report entries written alone whose write began inside the window (result-writes/pause:
// each its own transaction, beside the step's path, not counted in writes/pause; on one
// store that batches a result entry is in the transaction of the snapshot that feeds its
// reply, so only report entries and two-write stores count); and the
// median window of two writes per step over one (x-two-over-one).
func BenchmarkCutoverPauseDriver(b *testing.B) {
	windows := map[string][]time.Duration{}
	writeTime := map[string][]time.Duration{}
	writes, idle, results := map[string]int{}, map[string]int{}, map[string]int{}
	turn := 0
	for b.Loop() {
		for i := range pauseStores {
			store := pauseStores[(turn+i)%len(pauseStores)]
			rep, spans := runPause(b, store)
			windows[store] = append(windows[store], rep.Window)
			writeTime[store] = append(writeTime[store], rep.Costs.Save+rep.Costs.Audit)
			for _, sp := range spans {
				if sp.Start.Before(rep.Start) || !sp.Start.Before(rep.Start.Add(rep.Window)) {
					continue
				}
				switch {
				case sp.Kind == driver.SpanSave:
					writes[store]++
					if sp.N == 0 {
						idle[store]++
					}
				case sp.Kind == driver.SpanAudit && strings.HasPrefix(sp.What, driver.AuditExec+" "):
					writes[store]++
				case sp.Kind == driver.SpanAudit && (strings.HasPrefix(sp.What, driver.AuditResult+" ") || strings.HasPrefix(sp.What, driver.AuditReport+" ")):
					results[store]++
				}
			}
		}
		turn++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	floor := nearestRank(windows["none"], 0.5)
	for _, store := range pauseStores {
		med := nearestRank(windows[store], 0.5)
		b.ReportMetric(ms(med), store+"-median-ms")
		b.ReportMetric(ms(nearestRank(windows[store], 0.99)), store+"-p99-ms")
		if store == "none" {
			continue
		}
		b.ReportMetric(float64(med)/float64(floor), store+"-x-floor")
		b.ReportMetric(ms(nearestRank(writeTime[store], 0.5)), store+"-write-median-ms")
		b.ReportMetric(float64(writes[store])/float64(len(windows[store])), store+"-writes/pause")
		b.ReportMetric(float64(idle[store])/float64(len(windows[store])), store+"-no-cmd-saves/pause")
		b.ReportMetric(float64(results[store])/float64(len(windows[store])), store+"-result-writes/pause")
	}
	b.ReportMetric(float64(nearestRank(windows["bolt-two-writes"], 0.5))/float64(nearestRank(windows["bolt"], 0.5)), "x-two-over-one")
}

// runPause runs one cutover with its snapshots and audit log kept the way store says, and
// returns its pause and the Timeline's spans.
func runPause(b *testing.B, store string) (driver.PauseReport, []driver.Span) {
	s := newCutoverSetup(b)
	tl := &driver.Timeline{}
	kind := driver.Cutover(s.exec)
	cfg := driver.Config[cutover.Input]{ID: "ns/app", Logger: quiet, Trace: machine.Discard, Timeline: tl}
	if store != "none" {
		bs, err := boltstore.Open(filepath.Join(b.TempDir(), "loam.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer bs.Close()
		cfg.Store = bs
		if store == "bolt-two-writes" {
			cfg.Store = oneAtATime{bs}
		}
		tok := driver.Token{Holder: "bench", Epoch: 1}
		kind = driver.Cutover(&driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: s.exec,
			Audit: driver.NewAudit(cfg.Store, func() driver.Token { return tok }, quiet), Timeline: tl})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := driver.Run(ctx, kind, cfg, cutover.Input(s.start)); err != nil {
		b.Fatal(err)
	}
	if d := <-s.done; d.Outcome != cutover.Finalized {
		b.Fatalf("%s: outcome %s: %s", store, d.Outcome, d.Reason)
	}
	rep, ok := driver.CutoverPause(tl.Spans())
	if !ok {
		b.Fatalf("%s: no pause in the timeline", store)
	}
	return rep, tl.Spans()
}

// nearestRank is the q-quantile of ds (nearest rank).
func nearestRank(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}
