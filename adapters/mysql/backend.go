package mysql

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/adapters"
)

// Options configures a Backend. The zero value is usable.
type Options struct {
	// TLS, when set, is used for every connection, whatever the DSN's tls parameter says,
	// with no plaintext fallback. Leave it nil to follow the DSN; a DSN that names no tls
	// parameter is tls=true (TLS verifying the server's certificate and name).
	TLS *tls.Config
	// Insecure lets a password go to a server whose certificate is not verified (tls=false,
	// skip-verify or preferred): development only. Without it Open refuses such a login
	// with ErrUnverifiedPassword before connecting (caching_sha2_password without TLS asks
	// the server for an RSA key and encrypts the password to whatever key it is given).
	Insecure bool
	// MaxConns bounds the Backend's connection pool; default 4. FenceWrites holds one
	// connection for its whole run and settles through another.
	MaxConns int
	// Settle is how long after the accounts were locked FenceWrites must still find no
	// connection of the user before it returns; default 50ms. A login that passed its
	// authentication just before the lock shows in the process list only then, and this is
	// the time it is given to show up and be killed.
	Settle time.Duration
	// Binlog writes the fence's own statements (ACCOUNT LOCK, the fence record) to the binary
	// log, so replicas apply them too. Off by default: the fence runs with sql_log_bin = 0,
	// so fencing the old primary of a failover leaves no errant GTID on it, which would stop
	// it from rejoining as a replica (Vitess refuses to reparent onto a tablet with errant
	// GTIDs, and MariaDB's gtid_strict_mode refuses to replicate past one). The cost: a
	// replica of a fenced server is not fenced by it.
	Binlog bool
	// FenceSchema is the database holding the fence record (see FenceTable); default "loam".
	FenceSchema string
}

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	if o.Settle <= 0 {
		o.Settle = 50 * time.Millisecond
	}
	if o.FenceSchema == "" {
		o.FenceSchema = "loam"
	}
	return o
}

// Backend is a ShardBackend for one MySQL or MariaDB server (a WeSQL or MySQL primary behind
// Vitess, or a MariaDB one), reached as an administrator; see the package documentation for
// the privileges. It is safe for concurrent use.
type Backend struct {
	name   string
	db     *sql.DB
	opt    Options
	flavor Flavor
	mut    mutation
}

var _ adapters.ShardBackend = (*Backend)(nil)

// Open connects to the server of dsn (a go-sql-driver/mysql data source name such as
// "loam_admin:pw@tcp(shard-0:3306)/commerce") and checks that it answers and which flavor
// it is. Every connection speaks utf8mb4 (whatever charset the DSN names) and runs with
// time_zone '+00:00', so checksums print TIMESTAMP
// columns the same whatever the server's zone. Close the Backend when done.
func Open(ctx context.Context, dsn string, opt Options) (*Backend, error) {
	opt = opt.withDefaults()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: reading the DSN: %w", err)
	}
	host, _, _ := strings.Cut(cfg.Addr, ":")
	if h, _, err := net.SplitHostPort(cfg.Addr); err == nil {
		host = h
	}
	switch {
	case opt.TLS != nil:
		cfg.TLS = opt.TLS.Clone()
		cfg.TLSConfig = ""
		cfg.AllowFallbackToPlaintext = false
	case cfg.TLSConfig == "" && cfg.Net == "tcp":
		cfg.TLS = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		cfg.AllowFallbackToPlaintext = false
	}
	if cfg.Passwd != "" && !opt.Insecure && cfg.Net == "tcp" &&
		(cfg.TLS == nil || cfg.TLS.InsecureSkipVerify && cfg.TLS.VerifyPeerCertificate == nil && cfg.TLS.VerifyConnection == nil || cfg.AllowFallbackToPlaintext) {
		return nil, fmt.Errorf("mysql: %s: %w: the DSN's tls=%s does not verify the server (use tls=true or a registered TLS config with the servers' CA, or set insecure for a development database)", cfg.Addr, ErrUnverifiedPassword, cfg.TLSConfig)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	delete(cfg.Params, "charset")
	// utf8mb4 whatever the DSN asks: a multi-byte charset such as gbk or sjis reads an
	// escaped quote as part of a character, and identifiers and values this package
	// quotes itself must mean what they say.
	if err := cfg.Apply(mysql.Charset("utf8mb4", "utf8mb4_general_ci")); err != nil {
		return nil, fmt.Errorf("mysql: setting utf8mb4: %w", err)
	}
	cfg.MultiStatements = false
	name := cfg.Addr
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: %w", name, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(opt.MaxConns)
	db.SetMaxIdleConns(opt.MaxConns)
	b := &Backend{name: name, db: db, opt: opt}
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		db.Close()
		return nil, Classify(name, "Open", fmt.Errorf("connecting to %s as %q: %w", name, cfg.User, err))
	}
	b.flavor = MySQL
	if strings.Contains(strings.ToLower(version), "mariadb") {
		b.flavor = MariaDB
	}
	return b, nil
}

// ErrUnverifiedPassword: Open was asked to send a password to a server it would not verify
// (no TLS, or TLS without checking the certificate), and refused.
var ErrUnverifiedPassword = errors.New("mysql: refusing to send a password to a server whose certificate is not verified")

// Name is the server's address, as errors name it.
func (b *Backend) Name() string { return b.name }

// Flavor is the server's kind, read from its version at Open.
func (b *Backend) Flavor() Flavor { return b.flavor }

// Close closes the Backend's connections.
func (b *Backend) Close() error { return b.db.Close() }

// fail wraps err as this backend's error for op.
func (b *Backend) fail(op string, err error) error { return Classify(b.name, op, err) }

// failf is fail with a message of the Backend's own.
func (b *Backend) failf(op, code, format string, a ...any) error {
	return &adapters.BackendError{Backend: b.name, Op: op, Code: code, Err: fmt.Errorf(format, a...)}
}
