package mysqltest

import "time"

// Option configures a server started by Start or StartReplica.
type Option func(*config)

type config struct {
	flags []string      // extra mariadbd options, after the package's own; a later one wins
	delay time.Duration // replicas: MASTER_DELAY
}

// WithFlag adds a mariadbd command-line option, e.g. WithFlag("--max-connections=300") or
// WithFlag("--ssl-cert=/path/server.crt"). It comes after the package's own options, so it
// overrides them.
func WithFlag(flag string) Option {
	return func(c *config) { c.flags = append(c.flags, flag) }
}

// WithReplicationDelay makes a replica apply each transaction no sooner than d after the
// primary committed it (CHANGE MASTER TO MASTER_DELAY, whole seconds, rounded up). Only
// StartReplica reads it.
func WithReplicationDelay(d time.Duration) Option {
	return func(c *config) { c.delay = d }
}

// testFlags make a server fast and small at the cost of crash safety, which no test needs,
// and give it what replication and positions need: a ROW binary log with GTIDs.
var testFlags = []string{
	"--skip-name-resolve",
	"--log-bin=binlog",
	"--binlog-format=ROW",
	"--log-slave-updates",
	"--gtid-strict-mode=ON",
	"--character-set-server=utf8mb4",
	"--innodb-buffer-pool-size=32M",
	"--innodb-log-file-size=4M",
	"--innodb-flush-log-at-trx-commit=0",
	"--innodb-doublewrite=0",
	"--innodb-flush-method=nosync",
	"--sync-binlog=0",
	"--max-connections=300",
	"--skip-slave-start",
}
