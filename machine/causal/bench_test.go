package causal_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// fullWindow returns a machine holding a full 60 s history at 10 ms polling for a primary and
// three standbys (6,002 samples each), a frontend whose write completed mid-window, and a
// context at the end of the window.
func fullWindow() (*causal.Machine, *machine.Ctx) {
	m := causal.New(causal.Config{Window: lsn.DefaultWindow})
	ctx := &machine.Ctx{Rand: rand.New(rand.NewPCG(1, 2))}
	p := lsn.Endpoint{Host: "10.0.0.1", Port: 5432}
	stand := []lsn.Endpoint{{Host: "10.0.0.2", Port: 5432}, {Host: "10.0.0.3", Port: 5432}, {Host: "10.0.0.4", Port: 5432}}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 1, Endpoints: []lsn.Endpoint{p}})
	m.On(ctx, causal.SetHostgroup{Hostgroup: 2, Endpoints: stand})
	for ctx.Now = 0; ctx.Now <= 2*lsn.DefaultWindow; ctx.Now += 10 {
		pos := lsn.LSN(ctx.Now * 100)
		m.On(ctx, causal.Sampled{Endpoint: p, Sample: lsn.Observed(ctx.Now, pos)})
		for i, s := range stand {
			m.On(ctx, causal.Sampled{Endpoint: s, Sample: lsn.Observed(ctx.Now, pos-lsn.LSN(i)*5000)})
		}
		if ctx.Now == 90_000 {
			m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 1, Endpoint: p})
		}
	}
	return m, ctx
}

// BenchmarkSelection measures one causal selection (requirement lookup in a full 60 s
// history at 10 ms polling, filtering three standbys, ordering the eligible ones) and reports
// its ratio to an ordinary selection of the same hostgroup measured in the same run.
func BenchmarkSelection(b *testing.B) {
	m, ctx := fullWindow()
	if n := m.History(lsn.Endpoint{Host: "10.0.0.1", Port: 5432}).Len(); n != 6002 {
		b.Fatalf("history holds %d samples, want a full window of 6002", n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r, ok := m.On(ctx, causal.AcquireCausal{ID: uint64(i), Frontend: "f", Hostgroup: 2, From: 1, Deadline: ctx.Now + 1000})[0].(causal.Route)
		if !ok || !r.Constrained || len(r.Endpoints) != 3 {
			b.Fatalf("causal request not routed to all three standbys: %+v", r)
		}
	}
	b.StopTimer()
	causalNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	// The baseline: the same number of ordinary selections of the same hostgroup, same machine.
	start := time.Now()
	for i := range b.N {
		if _, ok := m.On(ctx, causal.Acquire{ID: uint64(i), Frontend: "f", Hostgroup: 2})[0].(causal.Route); !ok {
			b.Fatal("ordinary request not routed")
		}
	}
	ordinaryNs := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(ordinaryNs, "ordinary-ns/op")
	b.ReportMetric(causalNs/ordinaryNs, "causal/ordinary")
}
