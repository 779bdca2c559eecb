package refrouter_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/refrouter"
)

// BenchmarkBarrierVisible measures what the CUTOVER's drain waits for: the time from a
// barrier row's commit on a source shard to its row being visible on a destination that
// subscribes to it, on the cutover's servers (synchronous_commit off, as pglaunch runs them),
// nothing else writing, as inside the pause. Each iteration commits one barrier with the
// server's setting and one with synchronous_commit on (the drain's way), in alternating
// order, and reports both medians and the drain's against the server setting's (x-vs-async).
// Run it with -run '^$' -bench BarrierVisible -benchtime=20x.
func BenchmarkBarrierVisible(b *testing.B) {
	servers := startCutoverServers(b)
	benchRuns++
	db := "barrier" + strconv.Itoa(benchRuns)
	const table = "CREATE TABLE loam_reshard_sync (origin text, token bigint, PRIMARY KEY (origin, token))"
	servers.src.CreateDatabase(b, db)
	servers.dst.CreateDatabase(b, db)
	servers.src.Exec(b, db, table+"; CREATE PUBLICATION "+db+" FOR TABLE loam_reshard_sync")
	servers.dst.Exec(b, db, table)
	servers.dst.Exec(b, db, fmt.Sprintf("CREATE SUBSCRIPTION %s CONNECTION '%s' PUBLICATION %s WITH (copy_data = false)", db, servers.src.DSN(db), db))
	b.Cleanup(func() { servers.dst.Exec(b, db, "DROP SUBSCRIPTION "+db) })
	src, dst := servers.src.Connect(b, db), servers.dst.Connect(b, db)

	token := int64(0)
	visible := func(flush bool) time.Duration {
		token++
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if _, err := src.Exec(ctx, refrouter.BarrierSQL("bench", token, flush), pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatal(err)
		}
		for {
			var n int
			if err := dst.QueryRow(ctx, "SELECT count(*) FROM loam_reshard_sync WHERE token = $1", token).Scan(&n); err != nil {
				b.Fatalf("barrier %d not visible on the destination: %v", token, err)
			}
			if n == 1 {
				return time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
	}
	visible(true) // the subscription's worker is streaming once one barrier arrived

	var async, flushed []time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			async = append(async, visible(false))
			flushed = append(flushed, visible(true))
		} else {
			flushed = append(flushed, visible(true))
			async = append(async, visible(false))
		}
		i++
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	a, f := quantile(async, 0.5), quantile(flushed, 0.5)
	b.ReportMetric(ms(a), "async-median-ms")
	b.ReportMetric(ms(f), "flushed-median-ms")
	b.ReportMetric(ms(quantile(flushed, 0.99)), "flushed-p99-ms")
	b.ReportMetric(float64(f)/float64(max(a, time.Microsecond)), "x-vs-async")
}
