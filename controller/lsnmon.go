package controller

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/driver/causalread"
	"loam.dev/router/kernel/lsn"
)

// LSNMonitor is the causal-read LSN monitor a daemon runs for [lsn]: a CausalSelector with
// no application pools (the daemon routes no requests), whose pollers keep every
// endpoint's history exactly as a router's selector would. It shows the stats_pgsql_lsn
// view on /status and exports it to Prometheus. Every daemon runs its own, leader or not:
// the view is a process's, as a proxy's is.
type LSNMonitor struct {
	cfg LSNConfig
	sel *causalread.CausalSelector
	log *slog.Logger

	mu   sync.Mutex
	errs map[lsn.Endpoint]*pollErrors
}

// pollErrors is what failed polls of one endpoint said.
type pollErrors struct {
	total    int64
	last     string
	logged   time.Time
	unlogged int64 // failures since the last log line
}

// pollErrorLogEvery spaces the log lines of an endpoint that keeps failing: at 10 ms
// polls a stopped server fails a hundred times a second.
const pollErrorLogEvery = 30 * time.Second

// StartLSNMonitor starts polling every endpoint; nil when [lsn] lists none or is disabled.
func StartLSNMonitor(cfg LSNConfig, log *slog.Logger) (*LSNMonitor, error) {
	if !cfg.On() {
		return nil, nil
	}
	m := &LSNMonitor{cfg: cfg, log: log, errs: map[lsn.Endpoint]*pollErrors{}}
	m.sel = causalread.NewCausalSelector(causalread.CausalConfig{
		Poll:        postgres.LSNPollConfig{Interval: cfg.Interval.Duration, Timeout: cfg.Timeout.Duration, History: cfg.History.Duration},
		OnPollError: m.pollFailed,
	})
	for i, e := range cfg.Endpoints {
		ep := lsn.Endpoint{Host: e.Host, Port: uint16(e.Port)}
		conn, err := pgx.ParseConfig(pgURL(e.Host, e.Port, cfg.Database, cfg.User, cfg.PasswordEnv, cfg.SSLMode))
		if err != nil {
			m.sel.Close()
			return nil, fmt.Errorf("lsn.endpoints[%d] %s: %w", i, ep, err)
		}
		if err := m.sel.AddEndpoint(ep, nil, conn); err != nil {
			m.sel.Close()
			return nil, fmt.Errorf("lsn.endpoints[%d]: %w", i, err)
		}
	}
	log.Info("LSN monitor polling", "endpoints", len(cfg.Endpoints), "interval", cfg.Interval.Duration, "timeout", cfg.Timeout.Duration, "history", cfg.History.Duration)
	return m, nil
}

func (m *LSNMonitor) pollFailed(ep lsn.Endpoint, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.errs[ep]
	if e == nil {
		e = &pollErrors{}
		m.errs[ep] = e
	}
	e.total++
	e.unlogged++
	e.last = err.Error()
	if now := time.Now(); now.Sub(e.logged) >= pollErrorLogEvery {
		m.log.Warn("LSN poll failing: the endpoint's progress is unknown (NULL) until it answers", "endpoint", ep.String(),
			"failures", e.unlogged, "err", err)
		e.logged, e.unlogged = now, 0
	}
}

// Close stops the pollers.
// Close stops every poller.
func (m *LSNMonitor) Close() { m.sel.Close() }

// LSNView is the view as /status and `lsn stats --output json` give it.
type LSNView struct {
	IntervalMS int64    `json:"interval_ms"`
	TimeoutMS  int64    `json:"timeout_ms"`
	HistoryMS  int64    `json:"history_ms"`
	Rows       []LSNRow `json:"rows"`
}

// LSNRow is one physical endpoint: the view's hostname, port and lsn (null while unknown
// or withdrawn), and what the monitor retains and saw.
type LSNRow struct {
	Hostname string  `json:"hostname"`
	Port     int     `json:"port"`
	LSN      *string `json:"lsn"`
	// Position is lsn as a number of bytes (what the metric exports); null with lsn.
	Position   *uint64 `json:"position"`
	Samples    int     `json:"samples_retained"`
	Bytes      int     `json:"history_bytes"`
	AgeMS      *int64  `json:"sample_age_ms"` // null before the first poll
	PollErrors int64   `json:"poll_errors"`
	LastError  string  `json:"last_error,omitempty"`
}

// View is one row per configured endpoint, in the view's order (host, then port); an
// endpoint not polled yet has no position.
// View is the stats_pgsql_lsn view now (nil for a nil monitor: none runs).
func (m *LSNMonitor) View() *LSNView {
	if m == nil {
		return nil
	}
	v := m.view()
	return &v
}

func (m *LSNMonitor) view() LSNView {
	v := LSNView{IntervalMS: m.cfg.Interval.Milliseconds(), TimeoutMS: m.cfg.Timeout.Milliseconds(), HistoryMS: m.cfg.History.Milliseconds()}
	stats := map[lsn.Endpoint]causalread.MonitorRow{}
	for _, r := range m.sel.MonitorStats() {
		stats[r.Endpoint] = r
	}
	eps := make([]lsn.Endpoint, 0, len(m.cfg.Endpoints))
	for _, e := range m.cfg.Endpoints {
		eps = append(eps, lsn.Endpoint{Host: e.Host, Port: uint16(e.Port)})
	}
	slices.SortFunc(eps, lsn.Endpoint.Compare)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ep := range eps {
		row := LSNRow{Hostname: ep.Host, Port: int(ep.Port)}
		if r, ok := stats[ep]; ok {
			row.Samples, row.Bytes = r.Samples, r.Bytes
			age := r.Age.Milliseconds()
			row.AgeMS = &age
			if r.Known {
				text, pos := r.LSN.String(), uint64(r.LSN)
				row.LSN, row.Position = &text, &pos
			}
		}
		if e := m.errs[ep]; e != nil {
			row.PollErrors, row.LastError = e.total, e.last
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

// The monitor's metrics, read from the view at every scrape (no second copy to keep in step).
var (
	lsnPositionDesc = prometheus.NewDesc("loam_lsn_position_bytes",
		"The endpoint's latest known WAL position as a number (insert position of a primary, replay position of a standby); absent while unknown. Exact up to 2^53 (8 PiB of WAL).",
		[]string{"host", "port"}, nil)
	lsnKnownDesc = prometheus.NewDesc("loam_lsn_known",
		"1 while the endpoint's latest poll gave a position, 0 while its progress is unknown or withdrawn (stats_pgsql_lsn shows NULL).",
		[]string{"host", "port"}, nil)
	lsnSamplesDesc = prometheus.NewDesc("loam_lsn_samples_retained",
		"Successful samples the endpoint's LSN history retains (progress pruning keeps one per position, age pruning one anchor older than the history window).",
		[]string{"host", "port"}, nil)
	lsnBytesDesc = prometheus.NewDesc("loam_lsn_history_bytes",
		"Memory the endpoint's LSN history holds.", []string{"host", "port"}, nil)
	lsnAgeDesc = prometheus.NewDesc("loam_lsn_sample_age_seconds",
		"Time since the endpoint's latest poll was sent, successful or not (about lsn.interval while the monitor runs).",
		[]string{"host", "port"}, nil)
	lsnErrorsDesc = prometheus.NewDesc("loam_lsn_poll_errors_total",
		"Polls of the endpoint that failed (refused, timed out, no position).", []string{"host", "port"}, nil)
)

// Describe implements prometheus.Collector.
func (m *LSNMonitor) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lsnPositionDesc, lsnKnownDesc, lsnSamplesDesc, lsnBytesDesc, lsnAgeDesc, lsnErrorsDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *LSNMonitor) Collect(ch chan<- prometheus.Metric) {
	for _, r := range m.view().Rows {
		labels := []string{r.Hostname, fmt.Sprint(r.Port)}
		known := 0.0
		if r.Position != nil {
			known = 1
			ch <- prometheus.MustNewConstMetric(lsnPositionDesc, prometheus.GaugeValue, float64(*r.Position), labels...)
		}
		ch <- prometheus.MustNewConstMetric(lsnKnownDesc, prometheus.GaugeValue, known, labels...)
		ch <- prometheus.MustNewConstMetric(lsnSamplesDesc, prometheus.GaugeValue, float64(r.Samples), labels...)
		ch <- prometheus.MustNewConstMetric(lsnBytesDesc, prometheus.GaugeValue, float64(r.Bytes), labels...)
		if r.AgeMS != nil {
			ch <- prometheus.MustNewConstMetric(lsnAgeDesc, prometheus.GaugeValue, float64(*r.AgeMS)/1000, labels...)
		}
		ch <- prometheus.MustNewConstMetric(lsnErrorsDesc, prometheus.CounterValue, float64(r.PollErrors), labels...)
	}
}
