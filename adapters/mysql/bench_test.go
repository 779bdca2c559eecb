package mysql_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
)

// BenchmarkRealFence times FenceWrites (ACCOUNT LOCK with its record, killing every
// connection, the settle look) on a user with 50 open idle connections, and, as the baseline
// measured in the same run, on the same user with none. Each iteration is one run of each;
// the metrics are medians over the iterations (-benchtime=10x gives the 10 runs of the
// figure) and the ratio of the two medians.
func BenchmarkRealFence(b *testing.B) {
	const sessions = 50
	s := my.Get(b)
	ctx := context.Background()
	u := newEnvDB(b, s)
	be := openBackend(b, s, s.RootDSN(u.db), "")
	fence := func(open int) time.Duration {
		conns := make([]*sql.Conn, open)
		pool := sql.OpenDB(connector(s, u.db, u.app))
		defer pool.Close()
		pool.SetMaxIdleConns(open)
		for i := range conns {
			c, err := pool.Conn(ctx)
			require.NoError(b, err)
			conns[i] = c
		}
		t0 := time.Now()
		require.NoError(b, be.FenceWrites(ctx, u.app))
		d := time.Since(t0)
		for _, c := range conns {
			_, err := c.ExecContext(ctx, "SELECT 1")
			require.ErrorIs(b, mysqlad.ClassifySession(ctx, s.Addr(), "Select", err, connector(s, u.db, u.app)), adapters.ErrFenced,
				"every open connection must have been killed")
			c.Close()
		}
		require.NoError(b, be.UnfenceWrites(ctx, u.app))
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
