// Package controller is Loam Router's controller as a library: what `loamrouter serve`
// runs, for a control plane to embed instead of copying.
//
// A Controller is built by New from a Config, the struct loam.toml decodes into (ParseConfig
// and LoadConfig read the file; Validate checks one built in Go, and every mistake is a
// *ConfigError naming the key and the fix), and from plug-ins: the Store (shard map
// records and blobs: snapshots, the lease, requests, histories, the audit log), the
// logger, a prometheus.Registerer, an alert sink, and an Opener giving each database its
// Fleet: router instances (adapters.RouterInstance, adapters.Resharder), shard servers
// (adapters.ShardBackend) and where rendered files go (adapters.ConfigTarget). OpenFleet,
// the default, opens PgDog, Postgres, vtctld and MySQL as loam.toml says.
//
// Run stands by until the controller holds the lease in the store (one active controller
// per store; others stand by and take over, resuming every machine from its snapshot),
// then runs, for every database, ConfigPush on every new version of the record, the
// in-doubt monitor on its schedule, and the cutovers and failovers asked for; Drain stops
// it gracefully (commands in flight finish and are recorded, the lease is released).
// Requests are how anyone asks for a cutover or failover and decides one: a blob in the
// store that the active controller picks up, so the CLI in another process and an
// embedder's code go through the same functions; CutoverStatus and PlanCutover read.
//
// It is a package of its own at the top level, beside driver rather than inside it,
// because it is the composition the driver leaves out: driver runs one machine against
// the adapters' interfaces and imports no adapter, while a controller chooses adapters
// (PgDog, Postgres, Vitess, etcd, a ConfigMap directory) from a config and runs every
// machine of every database under one lease. Its dependencies are the machines, the
// driver and the adapters: no simulator, no conformance test helpers (a test checks
// `go list -deps`). controller/daemon is the process around it (the store, the
// authenticated listener, the drain), which cmd/loamrouter (flags, output, the commands'
// wording) and adapters/kubernetes's loamrouter-kubernetes both run.
package controller
