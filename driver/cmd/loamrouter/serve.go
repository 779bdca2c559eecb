package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/controller"
)

func newServeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "serve --config loam.toml",
		Short: "Run the controller: config pushes, the in-doubt monitor, cutovers and failovers",
		Long: `serve runs the controller for every [[databases]] table in loam.toml:

  - ConfigPush on every generation change of the record (a watch on the store): render the
    routers' files, write them to files_dir, RELOAD every router, confirm what each routes by;
  - the in-doubt monitor every indoubt.period: list prepared transactions on every shard,
    alert on those whose coordinator is gone or restarted (it never resolves one);
  - cutovers and failovers asked for with ` + "`loamrouter cutover start`" + ` and ` + "`loamrouter failover`" + `.

One controller is active at a time: it holds a lease in the store (controller.lease_ttl),
and every step it executes is refused once the lease is lost. Others stand by and take over
within one lease TTL of the active one dying, resuming each machine from its last saved
snapshot. The embedded store (bbolt) can be opened by one process only; to run a standby,
share a store that survives losing a machine: store.kind = "etcd" (recommended: the lease
is then etcd's own, renewed by this client and expired on etcd's clock, and every write
is refused by etcd once the tenure has ended) or "tikv". store.kind = "remote" with
` + "`loamrouter store-serve`" + ` shares one bbolt file through one HTTP server: for trying
standbys out on one machine, not a highly available store.

SIGTERM or Ctrl-C drains: nothing new starts, commands in flight finish and are recorded,
the lease is released so a standby takes over at once. A second signal stops at once.

controller.listen (default 127.0.0.1:9464) serves /metrics (Prometheus) and /healthz to
anyone, and /status and the store API (that the CLI uses while this daemon holds the
embedded store) to the [[credentials]] of loam.toml only: serve refuses to start without
one, and off a loopback address without [tls]. listen = "unix:/run/loam/ctl.sock" serves a
socket of mode 0600 instead, whose callers (its owner only) need no credential.

With [[lsn.endpoints]], every daemon (leader or standby) also runs the causal-read LSN
monitor: each listed Postgres server is polled on a connection of its own for its progress,
and the stats_pgsql_lsn view (host, port, position or NULL) is on /status, in the loam_lsn_*
metrics and in ` + "`loamrouter lsn stats`" + `.

Keys of loam.toml (all optional but [[databases]]):

  [controller] id, lease_ttl, lease_max_ttl, listen, hosts, token_env, token_file,
               read_timeout, drain_timeout
  [store]      kind (bolt|etcd|tikv|remote), dir, pd, url, token_env, token_file
    [store.etcd] endpoints, prefix (loam/), ca_file, cert_file, key_file, username_env,
                 password_env, timeout (5s)
  [[credentials]] name, role (operator|controller), token_env, token_file, cert_cn: who
               controller.listen and store-serve accept (required unless listen = "off")
  [tls]        cert_file, key_file (served; reloaded on SIGHUP), client_ca_file (mutual
               TLS), ca_file, client_cert_file, client_key_file (when dialing https://)
  [retention]  audit_max_age (720h), audit_max_count (100000), history_max_age (2160h),
               history_max_count (100 per database and kind), every (10m)
  [alerts]     kind (log|file), path
  [[databases]] namespace, name, files_dir, app_user, app_password_env, admin_user,
               admin_password_env, schema_admin, schema_admin_password_env, shard_user,
               shard_password_env, shard_sslmode, insecure
    [[databases.routers]] id, kind (pgdog), admin, config_dir, node_id
    [databases.indoubt]   enabled, period, threshold, stuck_after, deployment
    [databases.cutover]   designated, publication, lag_threshold_bytes, grace, poll_every,
                          finalize_after, retry_after, attempts, instance_attempts
  [[fencing]]  name, addrs, pods (the deployment's pod names), lease_ttl, old_lease,
               old_generation, new_lease, new_generation
  [shards]     allow (the hosts, *.domains, IPs and CIDRs the controller may log into as
               shard_user; required with shard_password_env unless insecure)
  [lsn]        enabled, interval (10ms), timeout (100ms), history (60s), user, password_env,
               database, sslmode (verify-full; with a password only verify-* unless insecure),
               insecure
    [[lsn.endpoints]] host, port (5432): each physical server once`,
		Example: `  loamrouter serve --config loam.toml
  loamrouter serve --config loam.toml --log-format json   # for a log collector
  curl -s 127.0.0.1:9464/metrics | grep loam_`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return c.serve(cmd) },
	}
}

// serve runs the daemon until it is drained (first signal, the command's context) or
// stopped hard (second signal, or the drain timeout).
func (c *cli) serve(cmd *cobra.Command) error {
	cfg := c.cfg
	drain := cmd.Context().Done()
	hard, stopHard := context.WithCancel(context.WithoutCancel(cmd.Context()))
	defer stopHard()
	go func() {
		<-drain
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		c.log.Info("draining: starting nothing new; a second signal stops at once", "timeout", cfg.Controller.DrainTimeout.Or(controller.DefaultDrainTimeout))
		t := time.NewTimer(cfg.Controller.DrainTimeout.Or(controller.DefaultDrainTimeout))
		defer t.Stop()
		select {
		case <-sigs:
			c.log.Warn("second signal: stopping without waiting for the commands in flight")
		case <-t.C:
			c.log.Warn("drain timeout: stopping without waiting for the commands in flight")
		case <-hard.Done():
		}
		stopHard()
	}()

	st, err := c.openStoreFor(hard, true)
	if err != nil {
		return err
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d, err := controller.New(*cfg, controller.WithStore(st), controller.WithLogger(c.log), controller.WithRegisterer(reg), controller.WithFleets(c.opener()))
	if err != nil {
		return err
	}
	context.AfterFunc(cmd.Context(), d.Drain)
	lsnMon, err := controller.StartLSNMonitor(cfg.LSN, c.log)
	if err != nil {
		return err
	}
	if lsnMon != nil {
		defer lsnMon.Close()
		reg.MustRegister(lsnMon)
	}

	if cfg.Controller.Listen != "off" {
		ls, err := c.listen("controller.listen", cfg.Controller.Listen, cfg.Controller.Hosts)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
		mux.Handle("/status", httpstore.Authenticate(ls.opts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(daemonStatus{Status: d.Status(), PID: os.Getpid(), LSN: lsnMon.View()})
		})))
		mux.Handle("/v1/", httpstore.Handler(st, ls.opts))
		srv := ls.serve(mux, c.log)
		defer srv.Close()
		c.log.Info("listening", "url", ls.url(), "paths", "/metrics /healthz (open) /status /v1/ (store; credential needed)", "credentials", len(cfg.Credentials))
	}
	if cfg.Store.Kind != "remote" { // the store server prunes a remote store
		go controller.KeepPruning(hard, st, cfg.Retention, c.log)
	}
	c.log.Info("controller starting", "id", cfg.Controller.ID, "store", cfg.Store.Kind, "databases", len(cfg.Databases))
	err = d.Run(hard)
	if errors.Is(err, context.Canceled) && hard.Err() != nil {
		return nil
	}
	return err
}

// daemonStatus is /status: the controller's, the process's id, and the LSN monitor's
// stats_pgsql_lsn view when it runs one.
type daemonStatus struct {
	controller.Status
	PID int                 `json:"pid"`
	LSN *controller.LSNView `json:"lsn,omitempty"`
}
