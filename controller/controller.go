package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
)

// Controller is one controller process's worth of work: it stands by until it holds the
// lease in its store, then runs every configured database's machines until it loses the
// lease, is drained or is stopped. Build it with New, run it with Run.
type Controller struct {
	cfg     *Config
	log     *slog.Logger
	store   Store
	lease   *driver.Lease
	guarded driver.GuardedStore
	audit   *driver.Audit
	m       *metrics
	alerts  driver.AlertSink
	drain   chan struct{}
	drained sync.Once
	// open reaches a database's routers and shards.
	open Opener
	// poll is how often requests (cutover, failover) are looked for (default 500ms).
	poll time.Duration
}

// Option is a plug-in of New.
type Option func(*options)

type options struct {
	store  Store
	log    *slog.Logger
	reg    prometheus.Registerer
	alerts driver.AlertSink
	open   Opener
	poll   time.Duration
}

// WithStore is where records, snapshots, the lease, requests and the audit log live
// (required). The controller never closes it.
func WithStore(st Store) Option { return func(o *options) { o.store = st } }

// WithLogger is the controller's logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegisterer registers the controller's loam_* series with r (default: a registry of
// its own that nobody serves). It adds no Go or process collectors: those are the
// process's, not the controller's.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithAlerts is where the in-doubt monitor's alerts go (default: [alerts] of the config,
// log lines or a JSON-lines file).
func WithAlerts(a driver.AlertSink) Option { return func(o *options) { o.alerts = a } }

// WithFleets opens each database's routers, resharders, shard servers and files target
// (default OpenFleet: PgDog admin databases, Postgres, vtctld and MySQL, files_dir). An
// embedding control plane plugs its own RouterInstance, ShardBackend and ConfigTarget in
// here.
func WithFleets(open Opener) Option { return func(o *options) { o.open = open } }

// WithRequestPoll is how often the store is read for cutover and failover requests
// (default 500ms).
func WithRequestPoll(d time.Duration) Option { return func(o *options) { o.poll = d } }

// ErrNoStore: New was given no store.
var ErrNoStore = errors.New("controller: no store (give WithStore)")

// New builds a controller of cfg. cfg is validated as ParseConfig validates loam.toml
// (a mistake is a *ConfigError naming the key), on a copy: the caller's value is not
// changed. Nothing runs until Run.
func New(cfg Config, opts ...Option) (*Controller, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.store == nil {
		return nil, ErrNoStore
	}
	cfg.Databases = slices.Clone(cfg.Databases)
	for i := range cfg.Databases {
		cfg.Databases[i].Routers = slices.Clone(cfg.Databases[i].Routers)
	}
	cfg.Credentials = slices.Clone(cfg.Credentials)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
	}
	if o.open == nil {
		for i, db := range cfg.Databases {
			if db.Target.Kind == TargetKubernetes {
				return nil, &ConfigError{Path: cfg.path, Key: fmt.Sprintf("databases[%d].target.kind", i),
					Msg: "kind kubernetes is run by the loamrouter-kubernetes binary (module loam.dev/router/adapters/kubernetes, cmd/loamrouter-kubernetes), which writes the ConfigMap through the Kubernetes API; this one writes files_dir only"}
			}
		}
		o.open = OpenFleet
	}
	d := &Controller{cfg: &cfg, log: o.log, store: o.store, drain: make(chan struct{}), open: o.open, poll: o.poll}
	var err error
	d.lease, err = driver.NewLease(o.store, driver.LeaseOptions{
		Holder: cfg.Controller.ID, TTL: cfg.Controller.LeaseTTL.Duration, MaxTTL: cfg.Controller.LeaseMaxTTL.Duration, Logger: o.log,
		OnChange: func(t driver.Token, held bool) {
			v := 0.0
			if held {
				v = 1
			}
			d.m.leader.WithLabelValues(t.Holder).Set(v)
			d.m.leaseEpoch.Set(float64(t.Epoch))
		},
	})
	if err != nil {
		return nil, err
	}
	d.guarded = driver.GuardedStore{Store: o.store, Lease: d.lease}
	// On a store-kept lease (etcd) the audit log is written through the guarded store too,
	// so a command's exec entry, written before the command runs, is refused by the store
	// once the tenure has ended, and the command with it.
	var auditStore adapters.BlobStore = o.store
	if d.lease.Native() {
		auditStore = d.guarded
	}
	d.audit = driver.NewAudit(auditStore, d.token, o.log)
	if d.m, err = newMetrics(o.reg, func() float64 { return float64(d.audit.Failures.Load()) }); err != nil {
		return nil, err
	}
	d.m.leader.WithLabelValues(cfg.Controller.ID).Set(0)
	d.alerts = o.alerts
	if d.alerts == nil {
		switch cfg.Alerts.Kind {
		case "file":
			d.alerts = &FileAlerts{Path: cfg.Alerts.Path}
		default:
			d.alerts = driver.LogAlerts{Logger: o.log}
		}
	}
	return d, nil
}

// Drain asks Run to stop gracefully: nothing new starts, commands in flight finish and
// are recorded, the lease is released so a standby takes over at once. Run then returns
// nil. Calling it again does nothing.
func (d *Controller) Drain() { d.drained.Do(func() { close(d.drain) }) }

// Config is the validated config the controller runs (defaults filled in). Do not change
// it.
func (d *Controller) Config() *Config { return d.cfg }

// Status is what a controller says of itself.
type Status struct {
	// Holder is this controller's id (controller.id).
	Holder string `json:"holder"`
	// Leader is whether it holds the lease now, under Epoch.
	Leader bool   `json:"leader"`
	Epoch  uint64 `json:"epoch"`
	// Why it does not lead, when it knows (a lost lease, no quorum).
	Why string `json:"why,omitempty"`
}

// Status reads the controller's state now.
func (d *Controller) Status() Status {
	tok, leader := d.lease.Valid()
	return Status{Holder: d.cfg.Controller.ID, Leader: leader, Epoch: tok.Epoch, Why: d.lease.Why()}
}

// Requests are this controller's store's requests, made by by (named in them and in the
// audit log).
func (d *Controller) Requests(by string) Requests {
	return Requests{Store: d.store, By: by, Log: d.log}
}

func (d *Controller) String() string {
	return fmt.Sprintf("controller %s (%d databases)", d.cfg.Controller.ID, len(d.cfg.Databases))
}
