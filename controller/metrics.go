package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"loam.dev/router/driver"
)

// metrics are the controller's Prometheus series, registered with the embedder's
// Registerer (the daemon's registry, which adds the Go and process collectors).
type metrics struct {
	routerGeneration *prometheus.GaugeVec     // db, instance
	pushDuration     *prometheus.HistogramVec // db, result
	cutoverStep      *prometheus.GaugeVec     // db, step: 1 for the current step
	cutoverStepTime  *prometheus.HistogramVec // db, step
	indoubtCount     *prometheus.GaugeVec     // db
	indoubtOldest    *prometheus.GaugeVec     // db
	leader           *prometheus.GaugeVec     // holder
	leaseEpoch       prometheus.Gauge
	steps            *prometheus.CounterVec // machine, result
	auditFailures    prometheus.CounterFunc
}

func newMetrics(reg prometheus.Registerer, auditFailures func() float64) (*metrics, error) {
	m := &metrics{}
	m.routerGeneration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loam_router_generation", Help: "Routing generation each router instance was last confirmed (or reloaded) at.",
	}, []string{"db", "instance"})
	m.pushDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "loam_configpush_duration_seconds", Help: "Time from a generation's push to its outcome.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"db", "result"})
	m.cutoverStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loam_cutover_step", Help: "1 for the step a cutover is at (copy, pause, fence, cutover, publish, resume, finalize), 0 otherwise.",
	}, []string{"db", "step"})
	m.cutoverStepTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "loam_cutover_step_duration_seconds", Help: "How long each cutover step took.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
	}, []string{"db", "step"})
	m.indoubtCount = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loam_indoubt_prepared_transactions", Help: "Prepared (two-phase) transactions seen on the database's shards at the last scan.",
	}, []string{"db"})
	m.indoubtOldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loam_indoubt_oldest_age_seconds", Help: "Age of the oldest prepared transaction at the last scan (0 when there is none).",
	}, []string{"db"})
	m.leader = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loam_controller_leader", Help: "1 while this controller holds the lease, 0 while it stands by.",
	}, []string{"holder"})
	m.leaseEpoch = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "loam_controller_lease_epoch", Help: "Epoch of this controller's current or last tenure.",
	})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loam_steps_total", Help: "Commands executed, by machine and result (ok, error, report).",
	}, []string{"machine", "result"})
	m.auditFailures = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "loam_audit_write_failures_total", Help: "Audit entries that could not be written.",
	}, auditFailures)
	for _, c := range []prometheus.Collector{m.routerGeneration, m.pushDuration, m.cutoverStep, m.cutoverStepTime, m.indoubtCount,
		m.indoubtOldest, m.leader, m.leaseEpoch, m.steps, m.auditFailures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("controller metrics: %w (one Registerer per controller, or wrap it with prometheus.WrapRegistererWith)", err)
		}
	}
	return m, nil
}

func (m *metrics) step(machine string, e driver.AuditEntry) {
	switch {
	case e.Event == driver.AuditReport:
		m.steps.WithLabelValues(machine, "report").Inc()
	case e.OK():
		m.steps.WithLabelValues(machine, "ok").Inc()
	default:
		m.steps.WithLabelValues(machine, "error").Inc()
	}
}

// cutoverAt marks step as the current step of db's cutover ("" clears every step).
func (m *metrics) cutoverAt(db, step string) {
	for _, s := range []string{"copy", "pause", "fence", "cutover", "publish", "resume", "finalize"} {
		v := 0.0
		if s == step {
			v = 1
		}
		m.cutoverStep.WithLabelValues(db, s).Set(v)
	}
}
