package main

import (
	"context"

	"github.com/spf13/cobra"

	"loam.dev/router/controller/daemon"
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
    [databases.target]    kind (files; kubernetes: run by loamrouter-kubernetes, the module
                          adapters/kubernetes), namespace, configmap, secret, pods, container
    [[databases.routers]] id, kind (pgdog), admin, config_dir, node_id
    [databases.indoubt]   enabled, period, threshold, stuck_after, deployment
    [databases.cutover]   designated, publication, lag_threshold_bytes, grace, poll_every,
                          finalize_after, retry_after, attempts, instance_attempts,
                          reverse_settle
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
// stopped hard (second signal, or the drain timeout): daemon.Serve, on the store this
// command's flags and loam.toml name, with the opener tests and the demo may set.
func (c *cli) serve(cmd *cobra.Command) error {
	st, err := c.openStoreFor(context.WithoutCancel(cmd.Context()), true)
	if err != nil {
		return err
	}
	defer st.Close()
	return daemon.Serve(cmd.Context(), c.cfg, st, daemon.Options{Log: c.log, Open: c.open})
}
