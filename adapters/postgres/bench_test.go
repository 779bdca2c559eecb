package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
)

// BenchmarkRealFence times FenceWrites (ALTER ROLE … NOLOGIN, terminating every session,
// the settle look) on a role with 50 open idle sessions, and, as the baseline measured in
// the same run, on the same role with none. Each iteration is one run of each; the metrics
// are medians over the iterations (-benchtime=10x gives the 10 runs of the figure) and the
// ratio of the two medians.
func BenchmarkRealFence(b *testing.B) {
	const sessions = 50
	s := pg.Get(b)
	ctx := context.Background()
	s.Exec(b, "postgres", "CREATE ROLE bench_app LOGIN")
	be, err := postgres.Open(ctx, s.DSN("postgres"), postgres.Options{})
	require.NoError(b, err)
	defer be.Close()
	fence := func(open int) time.Duration {
		conns := make([]*pgx.Conn, open)
		for i := range conns {
			c, err := pgx.Connect(ctx, dsnAs(s, "postgres", "bench_app"))
			require.NoError(b, err)
			conns[i] = c
		}
		t0 := time.Now()
		require.NoError(b, be.FenceWrites(ctx, "bench_app"))
		d := time.Since(t0)
		for _, c := range conns {
			_, err := c.Exec(ctx, "SELECT 1")
			require.Equal(b, postgres.CodeTerminated, postgres.Code(err), "every open session must have been ended")
			c.Close(ctx)
		}
		require.NoError(b, be.UnfenceWrites(ctx, "bench_app"))
		return d
	}
	var with, without []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		with = append(with, fence(sessions))
		without = append(without, fence(0))
	}
	median := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	mw, mo := median(with), median(without)
	b.ReportMetric(float64(mw.Microseconds())/1000, "fence50-ms-median")
	b.ReportMetric(float64(mo.Microseconds())/1000, "fence0-ms-median")
	b.ReportMetric(float64(mw)/float64(mo), "fence50/fence0")
	b.ReportMetric(float64(slices.Max(with).Microseconds())/1000, "fence50-ms-max")
}
