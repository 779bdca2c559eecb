package controller

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"loam.dev/router/adapters"
)

// Store is what a controller works on: shard map records and blobs (snapshots, the lease,
// requests, histories, the audit log).
type Store interface {
	adapters.ShardMapStore
	adapters.BlobStore
}

// Config is loam.toml. Every field's toml name is what an operator writes; errors name the
// key (controller.lease_ttl), its line, and what would be accepted.
type Config struct {
	Controller ControllerConfig `toml:"controller"`
	Store      StoreConfig      `toml:"store"`
	Alerts     AlertsConfig     `toml:"alerts"`
	Databases  []DatabaseConfig `toml:"databases"`
	Fencing    []FencingConfig  `toml:"fencing"`
	LSN        LSNConfig        `toml:"lsn"`
	Shards     ShardsConfig     `toml:"shards"` // shardaccess.go
	// Credentials are who this process's servers (controller.listen, store-serve) accept.
	Credentials []CredentialConfig `toml:"credentials"`
	TLS         TLSConfig          `toml:"tls"`
	Retention   RetentionConfig    `toml:"retention"`

	path string // the file it came from, for messages
}

// ControllerConfig is this controller process.
type ControllerConfig struct {
	// ID names this controller in the lease and the audit log (default <hostname>-<pid>).
	ID string `toml:"id"`
	// LeaseTTL is how long the active controller's lease lasts without renewal: a standby
	// takes over within one TTL of the active one dying (default 10s).
	LeaseTTL Duration `toml:"lease_ttl"`
	// Listen serves /metrics, /healthz and the store API the CLI uses while the daemon
	// holds the embedded store ("off" turns it off; "unix:/run/loam/ctl.sock" serves a Unix
	// socket of mode 0600 that needs no credential; default 127.0.0.1:9464).
	Listen string `toml:"listen"`
	// Hosts are names clients reach the listen address by (host:port), beyond the address
	// itself (and localhost for a loopback one): any other Host header is refused, a
	// defence against DNS rebinding. A wildcard bind (0.0.0.0) needs them.
	Hosts []string `toml:"hosts"`
	// TokenEnv or TokenFile hold the token the CLI sends to this daemon's listen address
	// (one of the [[credentials]] it accepts).
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
	// LeaseMaxTTL caps the TTL a lease blob may carry (default 60s, at least lease_ttl): a
	// lease written with a longer one is refused by the store servers and read as this long
	// by every controller, so no writer can stop the others for longer.
	LeaseMaxTTL Duration `toml:"lease_max_ttl"`
	// ReadTimeout bounds how long the API servers (controller.listen, store-serve) read one
	// request, headers and body (default 10s): a client sending a byte at a time is cut off.
	ReadTimeout Duration `toml:"read_timeout"`
	// DrainTimeout bounds a graceful stop (SIGTERM): commands in flight get this long to
	// finish and be recorded (default 30s).
	DrainTimeout Duration `toml:"drain_timeout"`
}

// StoreConfig says where shard map records, snapshots, the lease and the audit log live.
type StoreConfig struct {
	// Kind is bolt (the embedded default), tikv, etcd, or remote (a `loamrouter store-serve` or
	// another daemon's listen address).
	Kind string `toml:"kind"`
	// Etcd is [store.etcd], for kind etcd (store_etcd.go).
	Etcd EtcdStoreConfig `toml:"etcd"`
	// Dir is the embedded store's directory (kind bolt; default ./loam-data).
	Dir string `toml:"dir"`
	// PD lists TiKV's PD endpoints (kind tikv).
	PD []string `toml:"pd"`
	// URL is the store server (kind remote), e.g. http://127.0.0.1:7070.
	URL string `toml:"url"`
	// TokenEnv or TokenFile hold the token this process sends to the store server (kind
	// remote): a controller's credential for a daemon, an operator's for the CLI.
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
}

// CredentialConfig is one identity the servers accept: a bearer token (from an
// environment variable or a file readable by its owner only) or a client certificate's
// common name (with tls.client_ca_file). Role says what it may do: operator (status, the
// record, cutover and failover requests and decisions, reading and appending to the
// audit log) or controller (also machine snapshots, the lease and histories).
type CredentialConfig struct {
	Name      string `toml:"name"`
	Role      string `toml:"role"`
	TokenEnv  string `toml:"token_env"`
	TokenFile string `toml:"token_file"`
	CertCN    string `toml:"cert_cn"`

	token string // read from TokenEnv or TokenFile by check
}

// RetentionConfig bounds the audit log and the cutover and failover histories. The
// process that owns the store prunes them (store-serve; serve on the embedded store or
// TiKV) at start and every Every: entries older than the age, and all but the newest
// count (for histories: per database and kind). Zero keeps the default; "0s" or 0 cannot
// switch a bound off, so the store never grows without bound.
type RetentionConfig struct {
	AuditMaxAge     Duration `toml:"audit_max_age"`     // default 720h (30 days)
	AuditMaxCount   int      `toml:"audit_max_count"`   // default 100000
	HistoryMaxAge   Duration `toml:"history_max_age"`   // default 2160h (90 days), failovers (their keys hold the time)
	HistoryMaxCount int      `toml:"history_max_count"` // default 100 per database and kind
	Every           Duration `toml:"every"`             // default 10m
}

// TLSConfig is TLS for this process's listeners and for the servers it dials.
type TLSConfig struct {
	// CertFile and KeyFile (PEM) are served on controller.listen and by store-serve; they
	// are read again on SIGHUP.
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// ClientCAFile, when set, requires every client of those listeners to present a
	// certificate it signed (mutual TLS).
	ClientCAFile string `toml:"client_ca_file"`
	// CAFile is the authority the certificates of https:// servers this process dials
	// (store.url, a daemon's listen address) must chain to (default: the system's roots).
	CAFile string `toml:"ca_file"`
	// ClientCertFile and ClientKeyFile are presented to those servers (mutual TLS).
	ClientCertFile string `toml:"client_cert_file"`
	ClientKeyFile  string `toml:"client_key_file"`
}

// AlertsConfig says where the in-doubt monitor's and the cutover's alerts go.
type AlertsConfig struct {
	// Kind is log (error-level log lines; the default) or file (JSON lines appended to Path).
	Kind string `toml:"kind"`
	Path string `toml:"path"`
}

// DatabaseConfig is one mapped database and what the controller needs to run it.
type DatabaseConfig struct {
	Namespace string `toml:"namespace"` // default "default"
	Name      string `toml:"name"`
	// FilesDir is where the routers' rendered files are written on every generation (a
	// directory every instance reads, or a mounted ConfigMap's source in development).
	FilesDir string `toml:"files_dir"`
	// AppUser is the application login: rendered into users.toml and the role the cutover
	// fences on the source shards.
	AppUser        string `toml:"app_user"`
	AppPasswordEnv string `toml:"app_password_env"`
	// AdminPasswordEnv holds the password of PgDog's admin database (rendered and used for
	// RELOAD, PAUSE, RESUME).
	AdminUser        string `toml:"admin_user"`
	AdminPasswordEnv string `toml:"admin_password_env"`
	// SchemaAdmin is the login PgDog's COPY_DATA runs as (required while resharding).
	SchemaAdmin            string `toml:"schema_admin"`
	SchemaAdminPasswordEnv string `toml:"schema_admin_password_env"`
	// ShardUser is how the controller logs into each shard's Postgres to fence, unfence and
	// list prepared transactions (a superuser or a role with CREATEROLE and pg_signal_backend).
	ShardUser        string `toml:"shard_user"`
	ShardPasswordEnv string `toml:"shard_password_env"`
	// ShardSSLMode is libpq's sslmode for those logins (default verify-full; with a
	// password, only verify-full or verify-ca unless insecure).
	ShardSSLMode string `toml:"shard_sslmode"`
	// Insecure renders no TLS keys and lets the controller's shard logins go without
	// verified TLS and to any host when [shards] allow is empty (development only).
	Insecure bool `toml:"insecure"`
	// shardAllow is [shards] allow, parsed (shardaccess.go).
	shardAllow *shardAllow

	// Target is where the routers' files go ([databases.target]; default files_dir).
	Target TargetConfig `toml:"target"`

	Routers []RouterConfig `toml:"routers"`
	InDoubt InDoubtConfig  `toml:"indoubt"`
	Cutover CutoverConfig  `toml:"cutover"`

	// Vitess is set for a keyspace routed by vtgate (vitess.go).
	Vitess *VitessConfig `toml:"vitess"`
}

// Target kinds ([databases.target] kind).
const (
	// TargetFiles writes files_dir (and, before each RELOAD, every router's config_dir):
	// directories this process can write. The default.
	TargetFiles = "files"
	// TargetKubernetes writes a ConfigMap and a Secret through the Kubernetes API, which the
	// kubelet projects into the PgDog pods: the loamrouter-kubernetes binary of the module
	// loam.dev/router/adapters/kubernetes runs it (this module does not link client-go).
	TargetKubernetes = "kubernetes"
)

// TargetConfig is [databases.target]: where ConfigPush puts the routers' files.
type TargetConfig struct {
	// Kind is "files" (the default) or "kubernetes".
	Kind string `toml:"kind"`
	// Namespace holds the ConfigMap, the Secret and the PgDog pods (kind kubernetes;
	// default: the controller's own namespace, read from its service account).
	Namespace string `toml:"namespace"`
	// ConfigMap receives every rendered file but users.toml, Secret receives users.toml
	// (kind kubernetes; both required, both created beforehand: the controller only gets
	// and updates them).
	ConfigMap string `toml:"configmap"`
	Secret    string `toml:"secret"`
	// Pods is the label selector of the PgDog StatefulSet's pods (its spec.selector, e.g.
	// "app.kubernetes.io/name=pgdog"): the in-doubt monitor's roster is then the running
	// pods, each one's ordinal its NODE_ID and its container's start time, so a restarted
	// coordinator is noticed at indoubt.threshold. Empty: the routers' node_id, no start
	// times. Container names PgDog's container in those pods (default: the first).
	Pods      string `toml:"pods"`
	Container string `toml:"container"`
}

// RouterConfig is one router instance of a database.
type RouterConfig struct {
	ID string `toml:"id"`
	// Kind is pgdog (an instance's admin database).
	Kind string `toml:"kind"`
	// Admin is the admin database: host:port (logging in with the database's admin_user and
	// admin_password_env), or a whole connection string.
	Admin string `toml:"admin"`
	// ConfigDir is where this instance reads pgdog.toml and users.toml (written before
	// every RELOAD, since PgDog re-reads only the files it was started with). With
	// [databases.target] kind = "kubernetes" nothing is written there: it is where this
	// controller can read the files as the instance's pod sees them, and every RELOAD
	// waits until the router-generation key there shows the pushed generation.
	ConfigDir string `toml:"config_dir"`
	// NodeID is the instance id PgDog writes into two-phase commit gids (its NODE_ID).
	NodeID string `toml:"node_id"`
}

// InDoubtConfig tunes the in-doubt monitor of a database.
type InDoubtConfig struct {
	// Enabled runs the monitor (default true when the database has shards to scan).
	Enabled   *bool    `toml:"enabled"`
	Period    Duration `toml:"period"`    // default 30s
	Threshold Duration `toml:"threshold"` // default 5m
	// StuckAfter alerts a transaction still prepared under a live coordinator that started
	// before it (default twice threshold).
	StuckAfter Duration `toml:"stuck_after"`
	Deployment string   `toml:"deployment"`
}

// CutoverConfig is the default plan of a database's cutovers.
type CutoverConfig struct {
	Designated   string   `toml:"designated"`
	Publication  string   `toml:"publication"`
	LagThreshold int64    `toml:"lag_threshold_bytes"`
	Grace        Duration `toml:"grace"`
	// PollEvery is the catch-up poll interval (default 1s).
	PollEvery Duration `toml:"poll_every"`
	// RetryAfter is the base delay before a failed command is sent again (default 500ms);
	// Attempts how many tries before a failure counts (default 3). An unreachable instance
	// holds the pause for about Attempts × RetryAfter before the cutover goes on without it.
	RetryAfter Duration `toml:"retry_after"`
	Attempts   int      `toml:"attempts"`
	// InstanceAttempts is how many times the pause and the reload are sent to an instance
	// other than the designated one before the cutover goes on without it (default
	// attempts). Every write waits out those retries, while the fence already keeps an
	// instance that missed the step off the shards traffic leaves: 1 costs the pause
	// nothing when an instance is down, at the price of listing one whose failure was brief
	// as missed (cutover.Options.InstanceAttempts).
	InstanceAttempts int `toml:"instance_attempts"`
	// FinalizeAfter, when set, finalizes that long after every instance resumed unless a
	// rollback is asked first (default: wait for `cutover finalize`).
	FinalizeAfter Duration `toml:"finalize_after"`
	// ReverseSettle is how long a reverse waits between reloading the instances onto the
	// old layout and opening it (cutover.Options.ReverseSettle): the writes PgDog retries
	// there with the new layout's shard index wait on the fenced shards until PgDog's
	// checkout_timeout refuses them. Default DefaultReverseSettle, PgDog's default
	// checkout_timeout (which the rendered files keep) and 100 ms; set it above the
	// checkout_timeout the instances run with.
	ReverseSettle Duration `toml:"reverse_settle"`
}

// DefaultReverseSettle is databases.cutover.reverse_settle when unset: PgDog's default
// checkout_timeout (5 s, kept by kernel/render unless PgDogOptions.CheckoutTimeout is set)
// and 100 ms.
const DefaultReverseSettle = 5100 * time.Millisecond

// FencingConfig is one fenced session directory on Valkey/Redis whose key migration the
// fencing commands drive.
type FencingConfig struct {
	Name     string   `toml:"name"`
	Addrs    []string `toml:"addrs"`
	LeaseTTL Duration `toml:"lease_ttl"` // the directory's lease TTL: the drain wait (default 30s)
	// Pods is the fleet's roster: the names of every pod of the deployment that uses the
	// directory, as the deploy system lists them (--pods overrides it). The fencing commands
	// count a listed pod that has not reported as running O: legacy pods never report, and
	// the fleet's version cannot be learnt from reports alone. advance and enable refuse
	// without a roster.
	Pods []string `toml:"pods"`
	// Key templates (see kernel/fencing.Naming): <community> and <session> are replaced.
	OldLease      string `toml:"old_lease"`
	OldGeneration string `toml:"old_generation"`
	NewLease      string `toml:"new_lease"`
	NewGeneration string `toml:"new_generation"`
}

// LSNConfig is the causal-read LSN monitor: it polls every listed Postgres server on a
// connection of its own for its progress (the insert position of a primary, the replay
// position of a standby), keeps each server's history as causal reads need it, and shows the
// stats_pgsql_lsn view (one row per server: host, port, position or NULL) on /status, as
// metrics, and with `loamrouter lsn stats`. The names follow the proxy variables they mirror
// (pgsql-monitor_lsn_poll_interval, _poll_timeout, _history).
type LSNConfig struct {
	// Enabled runs the monitor (default true when endpoints are listed).
	Enabled *bool `toml:"enabled"`
	// Interval between two polls of one server (default 10ms).
	Interval Duration `toml:"interval"`
	// Timeout bounds each poll and each (re)connection (default 100ms).
	Timeout Duration `toml:"timeout"`
	// History is how long samples are retained (default 60s).
	History Duration `toml:"history"`
	// User, PasswordEnv, Database and SSLMode are the monitor's login on every server
	// (defaults postgres, none, postgres, verify-full). The polled functions are open to
	// every role, so a login-only role is enough. With a password, only verify-full or
	// verify-ca are accepted unless Insecure: a sslmode that does not verify the server
	// would hand the password to whoever answers at the endpoint's address.
	User        string `toml:"user"`
	PasswordEnv string `toml:"password_env"`
	Database    string `toml:"database"`
	SSLMode     string `toml:"sslmode"`
	Insecure    bool   `toml:"insecure"`
	// Endpoints are the physical servers, each once however many hostgroups list it.
	Endpoints []LSNEndpoint `toml:"endpoints"`
}

// LSNEndpoint is one physical Postgres server.
type LSNEndpoint struct {
	Host string `toml:"host"`
	Port int    `toml:"port"` // default 5432
}

// Duration is a TOML string such as "30s" or "5m".
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration (write it as a string such as \"30s\", \"5m\" or \"1h30m\")", b)
	}
	if v < 0 {
		return fmt.Errorf("%q is negative", b)
	}
	d.Duration = v
	return nil
}

// MarshalText formats it back.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Or returns d, or def when d is zero.
func (d Duration) Or(def time.Duration) time.Duration {
	if d.Duration == 0 {
		return def
	}
	return d.Duration
}

// ConfigError is a problem with loam.toml: where, what, and what to do.
type ConfigError struct {
	Path string
	Key  string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	at := e.Path
	if e.Line > 0 {
		at = fmt.Sprintf("%s:%d", at, e.Line)
	}
	if e.Key == "" {
		return at + ": " + e.Msg
	}
	return fmt.Sprintf("%s: %s: %s", at, e.Key, e.Msg)
}

// ErrConfig is matched by every ConfigError.
var ErrConfig = errors.New("loamrouter: configuration error")

func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// LoadConfig reads and checks a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Path: path, Msg: err.Error() + " (give --config the path of loam.toml, or run without it for the defaults)"}
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes and checks config text; path is only for messages.
func ParseConfig(path string, data []byte) (*Config, error) {
	c := &Config{path: path}
	d := toml.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(c); err != nil {
		return nil, decodeError(path, err)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeError(path string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		var errs []*ConfigError
		for _, e := range sm.Errors {
			line, _ := e.Position()
			msg := "unknown key"
			if s := suggest(reflect.TypeOf(Config{}), e.Key()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (see `loamrouter serve --help` for the keys)"
			}
			errs = append(errs, &ConfigError{Path: path, Key: strings.Join(e.Key(), "."), Line: line, Msg: msg})
		}
		if len(errs) == 1 {
			return errs[0]
		}
		lines := make([]string, len(errs))
		for i, e := range errs {
			lines[i] = fmt.Sprintf("line %d: %s: %s", e.Line, e.Key, e.Msg)
		}
		return &ConfigError{Path: path, Msg: fmt.Sprintf("%d unknown keys:\n  %s", len(errs), strings.Join(lines, "\n  "))}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if i := strings.Index(msg, "cannot decode TOML "); i >= 0 {
			// "cannot decode TOML string into struct field ...Port of type int": say it plainly.
			if j := strings.LastIndex(msg, " of type "); j > 0 {
				msg = "wrong type: " + strings.Fields(msg[i+len("cannot decode TOML "):])[0] + " given, " + msg[j+len(" of type "):] + " expected"
			}
		}
		return &ConfigError{Path: path, Key: strings.Join(de.Key(), "."), Line: line, Msg: msg}
	}
	return &ConfigError{Path: path, Msg: err.Error()}
}

// suggest finds the known key closest to the last element of key, among its siblings.
func suggest(t reflect.Type, key []string) string {
	for _, k := range key[:len(key)-1] {
		f, ok := fieldByTag(t, k)
		if !ok {
			return ""
		}
		t = f.Type
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	want := key[len(key)-1]
	best, bestD := "", 4
	for i := range t.NumField() {
		tag := strings.Split(t.Field(i).Tag.Get("toml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		if d := editDistance(want, tag); d < bestD {
			best, bestD = tag, d
		}
	}
	return best
}

func fieldByTag(t reflect.Type, tag string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if strings.Split(t.Field(i).Tag.Get("toml"), ",")[0] == tag {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Defaults.
const (
	defaultDataDir      = "./loam-data"
	defaultListen       = "127.0.0.1:9464"
	DefaultDrainTimeout = 30 * time.Second
	// defaultLeaseMaxTTL caps lease TTLs: six default TTLs.
	defaultLeaseMaxTTL = 60 * time.Second
)

// Source is the file the config came from (for messages).
func (c *Config) Source() string { return c.path }

// Validate checks a config built in Go as ParseConfig checks loam.toml, and fills the
// defaults in: a mistake is a *ConfigError naming the key and the fix. New validates its
// copy itself.
func (c *Config) Validate() error {
	if c.path == "" {
		c.path = "(config)"
	}
	return c.check()
}

// check validates values and fills defaults; errors name the key and the fix.
func (c *Config) check() error {
	bad := func(key, format string, a ...any) error {
		return &ConfigError{Path: c.path, Key: key, Msg: fmt.Sprintf(format, a...)}
	}
	if c.Controller.ID == "" {
		host, _ := os.Hostname()
		c.Controller.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Controller.Listen == "" {
		c.Controller.Listen = defaultListen
	}
	if c.Controller.LeaseTTL.Duration != 0 && c.Controller.LeaseTTL.Duration < 100*time.Millisecond {
		return bad("controller.lease_ttl", "%v is too short to renew over a network; use at least \"1s\" (default \"10s\")", c.Controller.LeaseTTL.Duration)
	}
	if ttl := c.Controller.LeaseTTL.Or(10 * time.Second); c.Controller.LeaseMaxTTL.Duration == 0 {
		c.Controller.LeaseMaxTTL.Duration = max(defaultLeaseMaxTTL, ttl)
	} else if c.Controller.LeaseMaxTTL.Duration < ttl {
		return bad("controller.lease_max_ttl", "%v is below controller.lease_ttl %v: this controller's own lease would be refused; raise it (default \"60s\")", c.Controller.LeaseMaxTTL.Duration, ttl)
	}
	if err := c.checkSecurity(bad); err != nil {
		return err
	}
	if err := c.Retention.check(bad); err != nil {
		return err
	}
	switch c.Store.Kind {
	case "", "bolt":
		c.Store.Kind = "bolt"
		if c.Store.Dir == "" {
			c.Store.Dir = defaultDataDir
		}
		if len(c.Store.PD) > 0 || c.Store.URL != "" {
			return bad("store", "kind bolt takes only dir; pd is for kind \"tikv\", url for kind \"remote\"")
		}
	case "tikv":
		if len(c.Store.PD) == 0 {
			return bad("store.pd", "kind tikv needs PD endpoints, e.g. pd = [\"10.0.0.1:2379\"]")
		}
	case "etcd":
		if err := c.Store.Etcd.check(bad); err != nil {
			return err
		}
	case "remote":
		if !strings.HasPrefix(c.Store.URL, "http://") && !strings.HasPrefix(c.Store.URL, "https://") {
			return bad("store.url", "kind remote needs the store server's URL, e.g. url = \"http://127.0.0.1:7070\" (got %q)", c.Store.URL)
		}
	default:
		return bad("store.kind", "%q is not a store kind; use \"bolt\" (embedded, the default), \"etcd\", \"tikv\" or \"remote\"", c.Store.Kind)
	}
	switch c.Alerts.Kind {
	case "", "log":
		c.Alerts.Kind = "log"
	case "file":
		if c.Alerts.Path == "" {
			return bad("alerts.path", "kind file needs a path to append JSON lines to")
		}
	default:
		return bad("alerts.kind", "%q is not an alert sink; use \"log\" or \"file\"", c.Alerts.Kind)
	}
	seen := map[adapters.DBRef]bool{}
	for i := range c.Databases {
		d := &c.Databases[i]
		at := fmt.Sprintf("databases[%d]", i)
		if d.Namespace == "" {
			d.Namespace = "default"
		}
		ref := adapters.DBRef{Namespace: d.Namespace, Database: d.Name}
		if err := ref.Validate(); err != nil {
			return bad(at+".name", "%v", err)
		}
		if seen[ref] {
			return bad(at+".name", "%s is configured twice; give each database one [[databases]] table", ref)
		}
		seen[ref] = true
		if d.Vitess != nil {
			if key, msg := d.Vitess.check(at+".vitess", d.Insecure); key != "" {
				return bad(key, "%s", msg)
			}
		}
		if err := d.Target.check(at+".target", d, bad); err != nil {
			return err
		}
		if !validSSLMode(d.ShardSSLMode) {
			return bad(at+".shard_sslmode", "%q is not an sslmode; use disable, prefer, require, verify-ca or verify-full", d.ShardSSLMode)
		}
		ids := map[string]bool{}
		for j, r := range d.Routers {
			rat := fmt.Sprintf("%s.routers[%d]", at, j)
			if r.ID == "" {
				return bad(rat+".id", "every router needs an id (its pod name or NODE_ID)")
			}
			if ids[r.ID] {
				return bad(rat+".id", "%q is used twice in %s", r.ID, ref)
			}
			ids[r.ID] = true
			switch r.Kind {
			case "", "pgdog":
				d.Routers[j].Kind = "pgdog"
				if r.Admin == "" {
					return bad(rat+".admin", "give the instance's admin database, e.g. admin = \"10.0.0.5:6432\"")
				}
			default:
				return bad(rat+".kind", "%q is not a router kind; use \"pgdog\"", r.Kind)
			}
		}
		if d.Cutover.Attempts < 0 {
			return bad(at+".cutover.attempts", "%d is negative; give how many times a command is sent, e.g. attempts = 3 (0 or unset: the default 3)", d.Cutover.Attempts)
		}
		if d.Cutover.InstanceAttempts < 0 {
			return bad(at+".cutover.instance_attempts", "%d is negative; give how many times the pause and the reload are sent to an instance, e.g. instance_attempts = 1 (0 or unset: attempts)", d.Cutover.InstanceAttempts)
		}
		if d.Cutover.Designated != "" && !ids[d.Cutover.Designated] {
			return bad(at+".cutover.designated", "%q is not one of this database's routers (%s)", d.Cutover.Designated, strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
		}
		for _, env := range []struct{ key, name string }{
			{"app_password_env", d.AppPasswordEnv}, {"admin_password_env", d.AdminPasswordEnv},
			{"schema_admin_password_env", d.SchemaAdminPasswordEnv}, {"shard_password_env", d.ShardPasswordEnv},
		} {
			if env.name != "" && os.Getenv(env.name) == "" {
				return bad(at+"."+env.key, "the environment variable %s is empty or unset; export it or remove the key", env.name)
			}
		}
	}
	names := map[string]bool{}
	for i, f := range c.Fencing {
		at := fmt.Sprintf("fencing[%d]", i)
		if f.Name == "" || names[f.Name] {
			return bad(at+".name", "every fencing directory needs a unique name (got %q)", f.Name)
		}
		names[f.Name] = true
		if len(f.Addrs) == 0 {
			return bad(at+".addrs", "give the Valkey/Redis addresses, e.g. addrs = [\"127.0.0.1:6379\"]")
		}
		if f.Pods != nil {
			if msg := CheckRoster(f.Pods); msg != "" {
				return bad(at+".pods", "%s", msg)
			}
		}
	}
	if err := c.Shards.check(c.Databases, bad); err != nil { // shardaccess.go
		return err
	}
	return c.LSN.check(bad)
}

// check validates [databases.target] (at is its key) and fills its kind in.
func (t *TargetConfig) check(at string, d *DatabaseConfig, bad func(key, format string, a ...any) error) error {
	switch t.Kind {
	case "", TargetFiles:
		t.Kind = TargetFiles
		for _, o := range []struct{ key, v string }{{"namespace", t.Namespace}, {"configmap", t.ConfigMap}, {"secret", t.Secret}, {"pods", t.Pods}, {"container", t.Container}} {
			if o.v != "" {
				return bad(at+"."+o.key, "is for kind = \"kubernetes\"; kind %q writes files_dir (set kind = \"kubernetes\" or remove the key)", t.Kind)
			}
		}
		return nil
	case TargetKubernetes:
	default:
		return bad(at+".kind", "%q is not a target kind; use \"files\" (files_dir, the default) or \"kubernetes\" (a ConfigMap and a Secret)", t.Kind)
	}
	if d.FilesDir != "" {
		return bad(at+".kind", "kind kubernetes writes the ConfigMap %q, and files_dir %s is set too: remove files_dir (one place holds the routers' files)", t.ConfigMap, d.FilesDir)
	}
	for _, o := range []struct{ key, v, what string }{
		{"configmap", t.ConfigMap, "the ConfigMap the PgDog pods mount (pgdog.toml), e.g. configmap = \"pgdog\""},
		{"secret", t.Secret, "the Secret the PgDog pods mount (users.toml: credentials never go into a ConfigMap), e.g. secret = \"pgdog-users\""},
	} {
		if o.v == "" {
			return bad(at+"."+o.key, "kind kubernetes needs %s", o.what)
		}
	}
	for _, o := range []struct{ key, v string }{{"configmap", t.ConfigMap}, {"secret", t.Secret}, {"namespace", t.Namespace}} {
		if o.v != "" && !isDNSName(o.v, o.key == "namespace") {
			return bad(at+"."+o.key, "%q is not a Kubernetes object name (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters; a namespace: no '.', at most 63)", o.v)
		}
	}
	if t.Container != "" && t.Pods == "" {
		return bad(at+".container", "names PgDog's container in the roster's pods: set pods (the StatefulSet's selector) too, or remove it")
	}
	dirs := 0
	for _, r := range d.Routers {
		if r.ConfigDir != "" {
			dirs++
		}
	}
	if dirs != 0 && dirs != len(d.Routers) {
		return bad(at+".kind", "with kind kubernetes, config_dir is where the controller reads what a pod sees before its RELOAD: give it for every router of the database or for none (%d of %d have one)", dirs, len(d.Routers))
	}
	return nil
}

// isDNSName reports whether s is a DNS-1123 subdomain (an object name), or with label a
// DNS-1123 label (a namespace).
func isDNSName(s string, label bool) bool {
	limit := 253
	if label {
		limit = 63
	}
	if s == "" || len(s) > limit {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if label && part != s {
			return false
		}
		if part == "" || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// check fills [retention]'s defaults.
func (r *RetentionConfig) check(bad func(key, format string, a ...any) error) error {
	if r.AuditMaxCount < 0 || r.HistoryMaxCount < 0 {
		return bad("retention", "counts must be positive (audit_max_count %d, history_max_count %d)", r.AuditMaxCount, r.HistoryMaxCount)
	}
	if r.AuditMaxAge.Duration == 0 {
		r.AuditMaxAge.Duration = 720 * time.Hour
	}
	if r.AuditMaxCount == 0 {
		r.AuditMaxCount = 100_000
	}
	if r.HistoryMaxAge.Duration == 0 {
		r.HistoryMaxAge.Duration = 2160 * time.Hour
	}
	if r.HistoryMaxCount == 0 {
		r.HistoryMaxCount = 100
	}
	if r.Every.Duration == 0 {
		r.Every.Duration = 10 * time.Minute
	}
	return nil
}

// Defaults of [lsn], as the proxy's.
const (
	defaultLSNInterval = 10 * time.Millisecond
	defaultLSNTimeout  = 100 * time.Millisecond
	defaultLSNHistory  = 60 * time.Second
)

// check validates [lsn] and fills its defaults.
func (l *LSNConfig) check(bad func(key, format string, a ...any) error) error {
	for _, d := range []struct {
		key string
		v   *Duration
		def time.Duration
	}{{"lsn.interval", &l.Interval, defaultLSNInterval}, {"lsn.timeout", &l.Timeout, defaultLSNTimeout}, {"lsn.history", &l.History, defaultLSNHistory}} {
		if d.v.Duration == 0 {
			d.v.Duration = d.def
		}
		if d.v.Duration < time.Millisecond {
			return bad(d.key, "%v is below the monitor's 1ms clock; use at least \"1ms\" (default %q)", d.v.Duration, d.def.String())
		}
	}
	if l.History.Duration < 2*l.Interval.Duration {
		return bad("lsn.history", "%v keeps less than two polls of lsn.interval %v: causal reads need a predecessor sample; use at least %v (default \"60s\")",
			l.History.Duration, l.Interval.Duration, 2*l.Interval.Duration)
	}
	if l.User == "" {
		l.User = "postgres"
	}
	if l.Database == "" {
		l.Database = "postgres"
	}
	if l.SSLMode == "" {
		l.SSLMode = "verify-full"
	}
	if !validSSLMode(l.SSLMode) {
		return bad("lsn.sslmode", "%q is not an sslmode; use disable, prefer, require, verify-ca or verify-full", l.SSLMode)
	}
	if l.PasswordEnv != "" && os.Getenv(l.PasswordEnv) == "" {
		return bad("lsn.password_env", "the environment variable %s is empty or unset; export it or remove the key", l.PasswordEnv)
	}
	if l.PasswordEnv != "" && !l.Insecure && l.SSLMode != "verify-full" && l.SSLMode != "verify-ca" {
		return bad("lsn.sslmode", "%q does not verify the server, so the monitor's password could be sent to whoever answers; use verify-full (the default) or verify-ca, or set lsn.insecure = true for a development database", l.SSLMode)
	}
	seen := map[string]int{}
	for i := range l.Endpoints {
		e := &l.Endpoints[i]
		at := fmt.Sprintf("lsn.endpoints[%d]", i)
		if e.Host == "" {
			return bad(at+".host", "give the server's host, e.g. host = \"10.0.0.2\" (and port, default 5432)")
		}
		if e.Port == 0 {
			e.Port = 5432
		}
		if e.Port < 1 || e.Port > 65535 {
			return bad(at+".port", "%d is not a TCP port; use 1 to 65535 (default 5432)", e.Port)
		}
		addr := net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
		if j, dup := seen[addr]; dup {
			return bad(at, "%s is listed twice (also lsn.endpoints[%d]): a server is polled once however many hostgroups list it; remove one", addr, j)
		}
		seen[addr] = i
	}
	return nil
}

// On reports whether the monitor runs.
func (l *LSNConfig) On() bool { return len(l.Endpoints) > 0 && (l.Enabled == nil || *l.Enabled) }

func validSSLMode(m string) bool {
	switch m {
	case "", "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
		return true
	}
	return false
}

// Database finds a configured database.
func (c *Config) Database(ref adapters.DBRef) (*DatabaseConfig, bool) {
	for i := range c.Databases {
		if c.Databases[i].Namespace == ref.Namespace && c.Databases[i].Name == ref.Database {
			return &c.Databases[i], true
		}
	}
	return nil, false
}

// secret reads the environment variable a *_env key names ("" when the key is unset).
func secret(env string) string {
	if env == "" {
		return ""
	}
	return os.Getenv(env)
}

// CheckRoster says what is wrong with a list of pod names ("" when nothing is).
func CheckRoster(pods []string) string {
	if len(pods) == 0 {
		return "lists no pod; give the deployment's pod names, e.g. pods = [\"relay-0\", \"relay-1\"]"
	}
	seen := map[string]int{}
	for i, p := range pods {
		if strings.TrimSpace(p) == "" {
			return fmt.Sprintf("name %d is empty; give each pod's name as the deploy system names it", i)
		}
		if strings.ContainsAny(p, ", \t\n") {
			return fmt.Sprintf("%q is not a pod name (no commas or spaces)", p)
		}
		if j, dup := seen[p]; dup {
			return fmt.Sprintf("%q is listed twice (names %d and %d); list each pod once", p, j, i)
		}
		seen[p] = i
	}
	return ""
}
