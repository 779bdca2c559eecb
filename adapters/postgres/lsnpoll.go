package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/kernel/lsn"
)

// LSNPollConfig is the LSN monitor's settings, named after the proxy variables they mirror.
type LSNPollConfig struct {
	// Interval between polls of one endpoint (pgsql-monitor_lsn_poll_interval); default 10 ms.
	Interval time.Duration
	// Timeout bounds each poll and each (re)connection of the monitor's own connection
	// (pgsql-monitor_lsn_poll_timeout); default 100 ms. It never applies to application
	// requests, which wait within their ordinary acquisition timeout.
	Timeout time.Duration
	// History is how long samples are retained (pgsql-monitor_lsn_history); default 60 s.
	History time.Duration
}

// Defaults of LSNPollConfig.
const (
	DefaultLSNPollInterval = 10 * time.Millisecond
	DefaultLSNPollTimeout  = 100 * time.Millisecond
	DefaultLSNHistory      = 60 * time.Second
)

// WithDefaults fills the zero fields with the defaults.
func (c LSNPollConfig) WithDefaults() LSNPollConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultLSNPollInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultLSNPollTimeout
	}
	if c.History <= 0 {
		c.History = DefaultLSNHistory
	}
	return c
}

// Clock is a monotonic millisecond clock. The monitor stamps samples with it and the request
// path stamps completions and deadlines with it, so both sides must share one.
type Clock func() int64

// NewClock returns a Clock counting milliseconds from now on Go's monotonic clock, which wall
// clock changes do not move.
func NewClock() Clock {
	start := time.Now()
	return func() int64 { return time.Since(start).Milliseconds() }
}

// lsnQuery reads the progress a causal read can rely on, in one round trip: the insertion
// position on a primary (pg_current_wal_insert_lsn, which covers commits acknowledged under
// asynchronous commit too, unlike the write or flush positions), the replay position on a
// standby (pg_last_wal_replay_lsn: everything up to it is visible to new snapshots there).
// pg_is_in_recovery() is read once in a subquery so both branches agree on the role.
const lsnQuery = `SELECT r, (CASE WHEN r THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text
FROM (SELECT pg_is_in_recovery() AS r) AS role`

// layoutQuery reads the WAL geometry needed to normalise a primary's insert position.
const layoutQuery = `SELECT current_setting('wal_block_size')::int8, pg_size_bytes(current_setting('wal_segment_size'))::int8`

// MonitorApplicationName is the application_name of the monitor's connections, so operators
// (and tests) can tell them from application sessions in pg_stat_activity.
const MonitorApplicationName = "loam-lsn-monitor"

// LSNPoller polls one physical endpoint's progress on a connection of its own. It never uses
// or inspects an application pool or session.
type LSNPoller struct {
	Endpoint lsn.Endpoint
	// Conn configures the monitor's own connection to Endpoint; it is copied, never shared.
	Conn   *pgx.ConnConfig
	Config LSNPollConfig
	Clock  Clock
	// Sink receives every sample in send order, successful or not. It must not block long:
	// the next poll waits for it.
	Sink func(lsn.Endpoint, lsn.Sample)
	// OnError, if set, receives the reason of every failed poll (the sample is Unknown).
	OnError func(lsn.Endpoint, error)
}

// ErrNoPosition is reported (through OnError) when the server answered with no position: a
// standby that has not replayed anything yet.
var ErrNoPosition = errors.New("postgres: the server reported no WAL position")

// Run polls until ctx is done, then closes its connection and returns ctx's error. A failed
// poll or connection records an Unknown sample and is retried at the next tick on a fresh
// connection.
func (p *LSNPoller) Run(ctx context.Context) error {
	cfg := p.Config.WithDefaults()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	var conn *pgx.Conn
	var layout lsn.WALLayout
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	last := int64(-1 << 63)
	for {
		if conn == nil {
			var err error
			conn, layout, err = p.connect(ctx, cfg.Timeout)
			if err != nil {
				p.fail(err)
			}
		}
		// Two polls in one millisecond would share a send time; the history needs them strictly
		// ordered, and a stamp must never be later than the real send, so wait instead.
		for p.Clock() <= last && ctx.Err() == nil {
			time.Sleep(200 * time.Microsecond)
		}
		sent := p.Clock()
		s := lsn.Unknown(sent)
		if conn != nil {
			qctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			pos, err := probe(qctx, conn, layout)
			cancel()
			if err == nil {
				s = lsn.Observed(sent, pos)
			} else {
				p.fail(fmt.Errorf("postgres: LSN poll of %s: %w", p.Endpoint, err))
				if !errors.Is(err, ErrNoPosition) {
					_ = conn.Close(context.Background())
					conn = nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = sent
		p.Sink(p.Endpoint, s)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (p *LSNPoller) fail(err error) {
	if p.OnError != nil {
		p.OnError(p.Endpoint, err)
	}
}

func (p *LSNPoller) connect(ctx context.Context, timeout time.Duration) (*pgx.Conn, lsn.WALLayout, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := p.Conn.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = MonitorApplicationName
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, lsn.WALLayout{}, fmt.Errorf("postgres: LSN monitor connection to %s: %w", p.Endpoint, err)
	}
	var w lsn.WALLayout
	var block, seg int64
	if err := conn.QueryRow(cctx, layoutQuery).Scan(&block, &seg); err != nil {
		_ = conn.Close(context.Background())
		return nil, w, fmt.Errorf("postgres: reading the WAL layout of %s: %w", p.Endpoint, err)
	}
	w = lsn.WALLayout{BlockSize: uint64(block), SegmentSize: uint64(seg)}
	if err := w.Validate(); err != nil {
		_ = conn.Close(context.Background())
		return nil, w, fmt.Errorf("postgres: %s: %w", p.Endpoint, err)
	}
	return conn, w, nil
}

// mutantRawInsert, set only by tests (export_test.go), skips the normalisation so a test can
// show that it is needed.
var mutantRawInsert atomic.Bool

// probe runs one poll: the normalised insert position of a primary or the replay position of
// a standby.
func probe(ctx context.Context, conn *pgx.Conn, layout lsn.WALLayout) (lsn.LSN, error) {
	var standby bool
	var text *string
	if err := conn.QueryRow(ctx, lsnQuery).Scan(&standby, &text); err != nil {
		return 0, err
	}
	if text == nil {
		return 0, ErrNoPosition
	}
	pos, err := lsn.Parse(*text)
	if err != nil {
		return 0, err
	}
	if !standby && !mutantRawInsert.Load() {
		pos = layout.InsertProgress(pos)
	}
	return pos, nil
}
