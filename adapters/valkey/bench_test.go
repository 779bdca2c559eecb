package valkey_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// BenchmarkRealAcquireLatency measures one acquire per version against the same standalone
// server, interleaved in every iteration so drift hits all versions alike, and reports the
// latency of A, B and C relative to O (goal for A and B: ≤ 1.3).
func BenchmarkRealAcquireLatency(b *testing.B) {
	srv := redistest.StartStandalone(b)
	ctx := context.Background()
	dirs := map[fencing.Version]*valkey.Directory{}
	for _, v := range fencing.Versions {
		d, err := valkey.NewDirectory(srv.Client, fencing.Buzz, v)
		if err != nil {
			b.Fatal(err)
		}
		dirs[v] = d
	}
	var spent [4]time.Duration
	var samples [4][]time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		for _, v := range fencing.Versions {
			s := fencing.Session{Community: "bench", ID: strconv.Itoa(i)}
			start := time.Now()
			r, err := dirs[v].Acquire(ctx, s, "pod", time.Minute)
			took := time.Since(start)
			spent[v] += took
			samples[v] = append(samples[v], took)
			if err != nil || !r.OK {
				b.Fatalf("acquire %s: %v %+v", v, err, r)
			}
			if _, err := dirs[v].Release(ctx, s, r.Lease); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
	for _, v := range fencing.Versions {
		b.ReportMetric(float64(spent[v].Nanoseconds())/float64(i), "ns/acquire-"+v.String())
	}
	// Medians: the machine running the benchmark is shared, and a mean is moved by a few
	// calls that waited for the CPU; the median compares the typical call of each version.
	med := func(v fencing.Version) float64 {
		s := slices.Clone(samples[v])
		slices.Sort(s)
		return float64(s[len(s)/2])
	}
	b.ReportMetric(med(fencing.A)/med(fencing.O), "A/O-p50")
	b.ReportMetric(med(fencing.B)/med(fencing.O), "B/O-p50")
	b.ReportMetric(med(fencing.C)/med(fencing.O), "C/O-p50")
	b.ReportMetric(float64(spent[fencing.A])/float64(spent[fencing.O]), "A/O-mean")
	b.ReportMetric(float64(spent[fencing.B])/float64(spent[fencing.O]), "B/O-mean")
}

// BenchmarkRealClusterScaling measures C acquires per second (acquire + release, 16 concurrent
// clients) on a 1-primary and a 3-primary cluster in the same run and reports the ratio.
// On a machine with fewer cores than primaries plus clients the ratio is bounded by the CPU,
// not by the cluster; read it with the core count.
func BenchmarkRealClusterScaling(b *testing.B) {
	one := redistest.StartCluster(b, 1)
	three := redistest.StartCluster(b, 3)
	ctx := context.Background()
	d1, err := valkey.NewDirectory(one.Client(b), fencing.Buzz, fencing.C)
	if err != nil {
		b.Fatal(err)
	}
	d3, err := valkey.NewDirectory(three.Client(b), fencing.Buzz, fencing.C)
	if err != nil {
		b.Fatal(err)
	}
	const workers, batch = 16, 400
	var seq atomic.Int64
	run := func(d *valkey.Directory) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range batch / workers {
					s := fencing.Session{Community: "bench", ID: strconv.FormatInt(seq.Add(1), 10)}
					r, err := d.Acquire(ctx, s, "pod", time.Minute)
					if err != nil || !r.OK {
						b.Errorf("acquire: %v %+v", err, r)
						return
					}
					if _, err := d.Release(ctx, s, r.Lease); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var t1, t3 time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		t1 += run(d1)
		t3 += run(d3)
		n++
	}
	ops := float64(n * batch)
	b.ReportMetric(ops/t1.Seconds(), "acquires/s-1primary")
	b.ReportMetric(ops/t3.Seconds(), "acquires/s-3primaries")
	b.ReportMetric(t1.Seconds()/t3.Seconds(), "scaling-3v1")
}
