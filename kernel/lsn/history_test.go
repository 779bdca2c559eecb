package lsn_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/lsn"
)

func TestFootprintConstantsMatchLayout(t *testing.T) {
	require.Equal(t, int(unsafe.Sizeof(lsn.PointForSize)), lsn.SizeofParts.Point)
	require.Equal(t, int(unsafe.Sizeof(lsn.HistoryForSize)), lsn.SizeofParts.History)
}

func TestAfterIsStrictlyLater(t *testing.T) {
	h := lsn.NewHistory(0)
	require.Equal(t, lsn.DefaultWindow, h.Window())
	_, ok := h.After(0)
	require.False(t, ok, "an empty history has no sample after anything")
	require.NoError(t, h.Record(lsn.Observed(10, 100)))
	require.NoError(t, h.Record(lsn.Observed(20, 200)))
	s, ok := h.After(9)
	require.True(t, ok)
	require.Equal(t, lsn.Observed(10, 100), s)
	s, _ = h.After(10)
	require.Equal(t, lsn.Observed(20, 200), s, "a sample sent at t itself may predate the commit")
	_, ok = h.After(20)
	require.False(t, ok, "pending until a poll sent after 20 answers")
}

func TestRecordRejectsOutOfOrder(t *testing.T) {
	h := lsn.NewHistory(1000)
	require.NoError(t, h.Record(lsn.Observed(10, 100)))
	require.ErrorIs(t, h.Record(lsn.Observed(10, 200)), lsn.ErrOutOfOrder)
	require.ErrorIs(t, h.Record(lsn.Unknown(5)), lsn.ErrOutOfOrder)
	s, _ := h.Latest()
	require.Equal(t, lsn.Observed(10, 100), s, "a rejected sample changes nothing")
}

func TestProgressPruningKeepsNewestOfRun(t *testing.T) {
	h := lsn.NewHistory(1000)
	for _, s := range []lsn.Sample{lsn.Observed(10, 100), lsn.Observed(20, 200), lsn.Observed(30, 200), lsn.Unknown(40), lsn.Observed(50, 200)} {
		require.NoError(t, h.Record(s))
	}
	require.Equal(t, []lsn.Sample{lsn.Observed(10, 100), lsn.Observed(50, 200)}, h.Samples())
	s, _ := h.After(25)
	require.Equal(t, lsn.LSN(200), s.LSN, "the run's position answers for any t inside the run")
	_, ok := h.After(50)
	require.False(t, ok)
}

func TestUnknownWithdrawsProgress(t *testing.T) {
	h := lsn.NewHistory(1000)
	require.False(t, h.Reached(0), "never sampled: nothing reached")
	require.NoError(t, h.Record(lsn.Observed(10, 100)))
	require.True(t, h.Reached(100))
	require.False(t, h.Reached(101))
	require.NoError(t, h.Record(lsn.Unknown(20)))
	require.False(t, h.Reached(0), "a failed latest poll withdraws the endpoint")
	s, ok := h.After(5)
	require.True(t, ok, "the last real observation still answers the source lookup")
	require.Equal(t, lsn.LSN(100), s.LSN)
	require.NoError(t, h.Record(lsn.Observed(30, 150)))
	require.True(t, h.Reached(150))
}

func TestAgePruningKeepsOneAnchor(t *testing.T) {
	h := lsn.NewHistory(100)
	for i := int64(0); i <= 10; i++ {
		require.NoError(t, h.Record(lsn.Observed(i*10, lsn.LSN(i))))
	}
	// now = 100, cutoff = 0: nothing is older than the window.
	require.Equal(t, 11, h.Len())
	require.NoError(t, h.Record(lsn.Observed(125, 11)))
	// cutoff = 25: samples at 0, 10, 20 are outside; 20 stays as the anchor.
	require.Equal(t, lsn.Observed(20, 2), h.Samples()[0])
	require.Equal(t, 10, h.Len())
	// The endpoint goes down for far longer than the window: its last observation stays.
	for ts := int64(135); ts < 1000; ts += 10 {
		require.NoError(t, h.Record(lsn.Unknown(ts)))
	}
	require.Equal(t, []lsn.Sample{lsn.Observed(125, 11)}, h.Samples())
	s, ok := h.After(124)
	require.True(t, ok)
	require.Equal(t, lsn.LSN(11), s.LSN)
	h.Prune(5000)
	require.Equal(t, 1, h.Len(), "explicit pruning keeps the anchor too")
}

// --- naive reference and properties ---

// naive keeps every sample ever recorded: the reference the pruned history is checked against.
type naive struct{ all []lsn.Sample }

func (n *naive) record(s lsn.Sample) { n.all = append(n.all, s) }

func (n *naive) after(t int64) (lsn.Sample, bool) {
	for _, s := range n.all {
		if s.Known && s.Sent > t {
			return s, true
		}
	}
	return lsn.Sample{}, false
}

func (n *naive) has(s lsn.Sample) bool {
	for _, x := range n.all {
		if x == s {
			return true
		}
	}
	return false
}

// stream is a generated poll sequence of one endpoint.
type stream struct {
	window  int64
	samples []lsn.Sample
}

// genStream mixes progress, stuck runs, regressions, outages and irregular intervals; windows
// are short so that samples age out within a few hundred polls.
func genStream() *rapid.Generator[stream] {
	return rapid.Custom(func(t *rapid.T) stream {
		st := stream{window: rapid.Int64Range(20, 400).Draw(t, "window")}
		now := rapid.Int64Range(-1000, 1000).Draw(t, "start")
		pos := lsn.LSN(rapid.Uint64Range(0, 1<<40).Draw(t, "pos"))
		segs := rapid.IntRange(1, 12).Draw(t, "segments")
		for range segs {
			kind := rapid.SampledFrom([]string{"progress", "stuck", "down", "flaky", "regress"}).Draw(t, "kind")
			n := rapid.IntRange(1, 80).Draw(t, "polls")
			for range n {
				now += rapid.Int64Range(1, 25).Draw(t, "dt")
				switch kind {
				case "progress":
					pos += lsn.LSN(rapid.Uint64Range(0, 3).Draw(t, "step"))
					st.samples = append(st.samples, lsn.Observed(now, pos))
				case "stuck":
					st.samples = append(st.samples, lsn.Observed(now, pos))
				case "down":
					st.samples = append(st.samples, lsn.Unknown(now))
				case "flaky":
					if rapid.Bool().Draw(t, "fail") {
						st.samples = append(st.samples, lsn.Unknown(now))
					} else {
						pos++
						st.samples = append(st.samples, lsn.Observed(now, pos))
					}
				case "regress":
					pos -= min(pos, lsn.LSN(rapid.Uint64Range(1, 5).Draw(t, "back")))
					st.samples = append(st.samples, lsn.Observed(now, pos))
				}
			}
		}
		return st
	})
}

// checkHistory replays st into a history (built by mk) and the naive reference, and after
// every sample checks the clauses of the package doc. It returns the first violation.
func checkHistory(st stream, mk func(window int64) *lsn.History) error {
	h := mk(st.window)
	var ref naive
	for i, s := range st.samples {
		if err := h.Record(s); err != nil {
			return err
		}
		ref.record(s)
		now := s.Sent
		cutoff := now - st.window
		retained := h.Samples()
		// Probe times: every sample's send time and its neighbours, and a time before all.
		// A stride keeps long streams affordable; the last 40 samples are always probed.
		probes := []int64{st.samples[0].Sent - 1}
		stride := max(1, (i+1)/40)
		for j, x := range st.samples[:i+1] {
			if j%stride == 0 || j > i-40 {
				probes = append(probes, x.Sent-1, x.Sent)
			}
		}
		for _, t := range probes {
			got, ok := h.After(t)
			want, wok := ref.after(t)
			if ok && (got.Sent <= t || !ref.has(got)) {
				return fmt.Errorf("after %d samples: After(%d) = %+v is not a real sample sent after t", i+1, t, got)
			}
			if wok && !ok {
				return fmt.Errorf("after %d samples (now %d): After(%d) lost the answer %+v that the full log has", i+1, now, t, want)
			}
			if wok && len(retained) > 0 && t >= retained[0].Sent && got.LSN != want.LSN {
				return fmt.Errorf("after %d samples (now %d): After(%d) = %v, the full log says %v", i+1, now, t, got.LSN, want.LSN)
			}
			if wok && t >= cutoff && got.LSN != want.LSN {
				return fmt.Errorf("after %d samples (now %d): inside the window After(%d) = %v, the full log says %v", i+1, now, t, got.LSN, want.LSN)
			}
		}
		// Bounds: in-window successful samples plus one anchor; a stuck window costs two.
		inWindow, distinct := 0, map[lsn.LSN]bool{}
		for _, x := range ref.all {
			if x.Known && x.Sent >= cutoff {
				inWindow++
				distinct[x.LSN] = true
			}
		}
		if h.Len() > inWindow+1 {
			return fmt.Errorf("after %d samples (now %d): %d retained, more than %d in the window plus an anchor", i+1, now, h.Len(), inWindow)
		}
		if len(distinct) <= 1 && h.Len() > 2 {
			return fmt.Errorf("after %d samples (now %d): stuck or down for the whole window yet %d samples retained", i+1, now, h.Len())
		}
		if h.Footprint() > lsn.SizeofParts.History+lsn.SizeofParts.Point*(4*h.Len()+16) {
			return fmt.Errorf("after %d samples: footprint %d bytes for %d samples", i+1, h.Footprint(), h.Len())
		}
		// Reached follows the latest sample only.
		latest := s
		if latest.Known != h.Reached(0) || latest.Known && (!h.Reached(latest.LSN) || h.Reached(latest.LSN+1)) {
			return fmt.Errorf("after %d samples: Reached disagrees with the latest sample %+v", i+1, latest)
		}
	}
	return nil
}

func TestHistoryMatchesFullLog(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		require.NoError(t, checkHistory(genStream().Draw(t, "stream"), lsn.NewHistory))
	})
}

// TestHistoryMutantsAreCaught shows each clause is enforced: every mutant of the pruning is
// caught by checkHistory on some generated stream within a bounded number of seeds.
func TestHistoryMutantsAreCaught(t *testing.T) {
	for name, m := range map[string]lsn.Mutant{
		"keep-first-of-run": lsn.MutantKeepFirstOfRun,
		"no-progress-prune": lsn.MutantNoProgressPrune,
		"no-anchor":         lsn.MutantNoAnchor,
		"no-age-prune":      lsn.MutantNoAgePrune,
	} {
		t.Run(name, func(t *testing.T) {
			mk := func(w int64) *lsn.History { return lsn.NewMutantHistory(w, m) }
			for seed := range 500 {
				if err := checkHistory(genStream().Example(seed), mk); err != nil {
					t.Logf("seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("mutant %s survived 500 streams", name)
		})
	}
}

// TestStuckPeerFullWindow: 10 ms polling for twice the default window, stuck, then down, then
// flapping: never more than two samples and a constant footprint.
func TestStuckPeerFullWindow(t *testing.T) {
	h := lsn.NewHistory(lsn.DefaultWindow)
	peak := 0
	for ts := int64(0); ts < 2*lsn.DefaultWindow; ts += 10 {
		var s lsn.Sample
		switch {
		case ts < 500:
			s = lsn.Observed(ts, lsn.LSN(ts)) // progress, then stuck at 490
		case ts < 70_000:
			s = lsn.Observed(ts, 490)
		case ts%30 == 0:
			s = lsn.Unknown(ts)
		default:
			s = lsn.Observed(ts, 490)
		}
		require.NoError(t, h.Record(s))
		if ts >= lsn.DefaultWindow+500 {
			require.LessOrEqual(t, h.Len(), 2)
			peak = max(peak, h.Footprint())
		}
	}
	require.LessOrEqual(t, peak, lsn.SizeofParts.History+lsn.SizeofParts.Point*(4*2+16))
}

// BenchmarkRecord is the cost of recording one sample into a full 60 s history (10 ms polls,
// steady progress), age pruning and compaction included. It also reports what one endpoint
// retains after 60 s of 10 ms polling with steady progress and with a stuck peer.
func BenchmarkRecord(b *testing.B) {
	fill := func(stuck bool) *lsn.History {
		h := lsn.NewHistory(lsn.DefaultWindow)
		for ts := int64(0); ts <= lsn.DefaultWindow; ts += 10 {
			pos := lsn.LSN(ts * 100)
			if stuck {
				pos = 4242
			}
			_ = h.Record(lsn.Observed(ts, pos))
		}
		return h
	}
	steady, stuck := fill(false), fill(true)
	h := fill(false)
	ts := lsn.DefaultWindow
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ts += 10
		if err := h.Record(lsn.Observed(ts, lsn.LSN(ts*100))); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(steady.Len()), "steady-samples")
	b.ReportMetric(float64(steady.Footprint()), "steady-bytes")
	b.ReportMetric(float64(stuck.Len()), "stuck-samples")
	b.ReportMetric(float64(stuck.Footprint()), "stuck-bytes")
}
