package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/lsn"
)

// TestRealLSNMonitor runs the daemon's LSN monitor over a real primary and its streaming
// standby: the view (on /status, through `lsn stats`) and the metrics show both servers'
// positions; they move forward as the primary writes WAL, the standby's up to what the
// primary had when it caught up; once the standby is stopped its row goes NULL and its
// metrics unknown, while the primary's keeps moving.
func TestRealLSNMonitor(t *testing.T) {
	primary := pgtest.Start(t, pgtest.WithSetting("wal_writer_delay", "10ms"))
	primary.Exec(t, "postgres", "CREATE TABLE wal (id bigint, pad text)")
	standby := primary.StartStandby(t)
	standby.WaitCaughtUp(t, time.Minute)

	dir := t.TempDir()
	listen := freePort(t)
	pAddr, sAddr := fmt.Sprintf("127.0.0.1:%d", primary.Port), fmt.Sprintf("127.0.0.1:%d", standby.Port)
	conf := lsnConfig(t, dir, listen, pAddr, sAddr)
	serveInProcess(t, conf, listen)

	row := func(v controller.LSNView, port int) controller.LSNRow {
		for _, r := range v.Rows {
			if r.Port == port {
				return r
			}
		}
		t.Fatalf("no row for port %d in %+v", port, v)
		return controller.LSNRow{}
	}
	pos := func(r controller.LSNRow) lsn.LSN {
		require.NotNil(t, r.LSN, "%+v", r)
		l, err := lsn.Parse(*r.LSN)
		require.NoError(t, err)
		require.Equal(t, uint64(l), *r.Position, "the number is the position")
		return l
	}
	var v controller.LSNView
	require.Eventually(t, func() bool {
		v = lsnStats(t, conf)
		return len(v.Rows) == 2 && v.Rows[0].LSN != nil && v.Rows[1].LSN != nil
	}, 20*time.Second, 20*time.Millisecond, "both servers get a position")
	p0, s0 := pos(row(v, primary.Port)), pos(row(v, standby.Port))
	labels := func(port int) string { return fmt.Sprintf(`{host="127.0.0.1",port="%d"}`, port) }
	m0 := scrape(t, listen)
	require.Equal(t, 1.0, m0["loam_lsn_known"+labels(primary.Port)])
	require.Equal(t, 1.0, m0["loam_lsn_known"+labels(standby.Port)])

	// WAL advances: both positions move, the standby's at least to the primary's insert
	// position when it had caught up.
	primary.Exec(t, "postgres", "INSERT INTO wal SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g")
	standby.WaitCaughtUp(t, time.Minute)
	target, err := lsn.Parse(primary.QueryString(t, "postgres", "SELECT pg_current_wal_insert_lsn()::text"))
	require.NoError(t, err)
	require.Greater(t, target, p0+1_000_000, "the insert wrote more than a megabyte of WAL")
	require.Eventually(t, func() bool {
		v = lsnStats(t, conf)
		p, s := row(v, primary.Port), row(v, standby.Port)
		return p.LSN != nil && s.LSN != nil && pos(p) > p0 && pos(s) >= target
	}, 20*time.Second, 20*time.Millisecond, "the view follows the WAL")
	require.Greater(t, pos(row(v, standby.Port)), s0)
	m1 := scrape(t, listen)
	for _, port := range []int{primary.Port, standby.Port} {
		require.Greater(t, m1["loam_lsn_position_bytes"+labels(port)], m0["loam_lsn_position_bytes"+labels(port)], "port %d", port)
		require.GreaterOrEqual(t, m1["loam_lsn_samples_retained"+labels(port)], 2.0, "a history with a predecessor, port %d", port)
		require.Greater(t, m1["loam_lsn_history_bytes"+labels(port)], 0.0)
		require.Less(t, m1["loam_lsn_sample_age_seconds"+labels(port)], 2.0)
	}
	require.GreaterOrEqual(t, m1["loam_lsn_position_bytes"+labels(standby.Port)], float64(target))

	// The standby stops: its row goes NULL and its metrics unknown; the primary's goes on.
	require.NoError(t, standby.Stop())
	require.Eventually(t, func() bool {
		v = lsnStats(t, conf)
		return row(v, standby.Port).LSN == nil
	}, 20*time.Second, 20*time.Millisecond, "a stopped standby's progress is unknown")
	sRow := row(v, standby.Port)
	require.Nil(t, sRow.Position)
	require.NotZero(t, sRow.PollErrors)
	require.NotEmpty(t, sRow.LastError)
	require.NotZero(t, sRow.Samples, "its history is kept (the anchor of age pruning)")
	pBefore := pos(row(v, primary.Port))
	primary.Exec(t, "postgres", "INSERT INTO wal SELECT g, 'y' FROM generate_series(1, 1000) g")
	require.Eventually(t, func() bool {
		return pos(row(lsnStats(t, conf), primary.Port)) > pBefore
	}, 20*time.Second, 20*time.Millisecond, "the primary's row keeps moving")
	m2 := scrape(t, listen)
	require.Equal(t, 0.0, m2["loam_lsn_known"+labels(standby.Port)])
	require.NotContains(t, m2, "loam_lsn_position_bytes"+labels(standby.Port))
	require.Greater(t, m2["loam_lsn_poll_errors_total"+labels(standby.Port)], 0.0)
	require.Equal(t, 1.0, m2["loam_lsn_known"+labels(primary.Port)])
	require.Greater(t, m2["loam_lsn_position_bytes"+labels(primary.Port)], m1["loam_lsn_position_bytes"+labels(primary.Port)])

	text, _, err := runSplit(t, "--config", conf, "lsn", "stats")
	require.NoError(t, err)
	require.Regexp(t, `127\.0\.0\.1\s+`+strconv.Itoa(standby.Port)+`\s+NULL\n`, text)
	require.Regexp(t, `127\.0\.0\.1\s+`+strconv.Itoa(primary.Port)+`\s+[0-9A-F]+/[0-9A-F]+\n`, text)
	t.Log("\n" + text)
}
