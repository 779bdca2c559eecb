package merge

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

// benchOrder is ORDER BY a ASC, b DESC (NULLS FIRST by default) over rows (a int8, b text, id int8).
var benchOrder = OrderBy{{Col: 0}, {Col: 1, Desc: true}}

// benchShards makes k shards of about n rows in total, each sorted by benchOrder. Values are
// drawn so that ties on a are common and b sometimes breaks them, sometimes is NULL.
func benchShards(k, n int, seed uint64) [][]Row {
	rng := rand.New(rand.NewPCG(seed, 0))
	words := make([]Value, 64)
	for i := range words {
		words[i] = Text("customer-" + strconv.Itoa(rng.IntN(1_000_000)))
	}
	shards := make([][]Row, k)
	for s := range shards {
		m := n / k
		if s < n%k {
			m++
		}
		cells := make([]Value, 3*m)
		rows := make([]Row, m)
		for r := range rows {
			row := cells[3*r : 3*r+3 : 3*r+3]
			row[0] = Int(rng.Int64N(int64(n / 4)))
			if rng.IntN(20) > 0 {
				row[1] = words[rng.IntN(len(words))]
			}
			row[2] = Int(int64(s*n + r))
			rows[r] = row
		}
		slices.SortStableFunc(rows, benchOrder.Compare)
		// Lay the rows out in their sorted order, as a driver decoding a shard's reply would.
		sorted := make([]Value, 0, 3*m)
		for r, row := range rows {
			sorted = append(sorted, row...)
			rows[r] = sorted[3*r : 3*r+3 : 3*r+3]
		}
		shards[s] = rows
	}
	return shards
}

// BenchmarkMerge16x1M merges 16 sorted streams of 1,000,000 rows in total and, in the same
// iterations, sorts their concatenation with slices.SortStableFunc (the same comparison), the
// baseline a merge must beat. Reported: rows/s of each and the ratio sort time / merge time.
func BenchmarkMerge16x1M(b *testing.B) {
	const k, n = 16, 1_000_000
	shards := benchShards(k, n, 1)
	concat := slices.Concat(shards...)
	work := make([]Row, n)

	// The two must agree, or the ratio compares different work.
	res, err := Merge(shards, benchOrder, Limit{Count: All})
	if err != nil {
		b.Fatal(err)
	}
	copy(work, concat)
	slices.SortStableFunc(work, benchOrder.Compare)
	for i := range work {
		if &work[i][0] != &res.Rows[i][0] {
			b.Fatalf("row %d: the merge and the stable sort disagree", i)
		}
	}

	b.ReportAllocs()
	var mergeT, sortT time.Duration
	iters := 0
	for b.Loop() {
		// Collect garbage before each timed part, so that neither pays for the other's.
		runtime.GC()
		t0 := time.Now()
		if _, err := Merge(shards, benchOrder, Limit{Count: All}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		copy(work, concat)
		runtime.GC()
		t2 := time.Now()
		slices.SortStableFunc(work, benchOrder.Compare)
		t3 := time.Now()
		mergeT += t1.Sub(t0)
		sortT += t3.Sub(t2)
		iters++
	}
	rows := float64(n) * float64(iters)
	b.ReportMetric(rows/mergeT.Seconds(), "merge_rows/s")
	b.ReportMetric(rows/sortT.Seconds(), "sort_rows/s")
	b.ReportMetric(sortT.Seconds()/mergeT.Seconds(), "merge_speedup_x")
}

// BenchmarkMergeLimit is the common case of a router: LIMIT 100 over 16 shards of 100 rows.
func BenchmarkMergeLimit(b *testing.B) {
	shards := benchShards(16, 1600, 2)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Merge(shards, benchOrder, Limit{Count: 100}); err != nil {
			b.Fatal(err)
		}
	}
}
