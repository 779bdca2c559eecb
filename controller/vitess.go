package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/adapters"
	mysqladapter "loam.dev/router/adapters/mysql"
	"loam.dev/router/adapters/vtctld"
	"loam.dev/router/kernel/shardmap"
)

// VitessConfig is how the controller reaches Vitess for a keyspace routed by vtgate:
// vtctld's gRPC API, which a failover tells the promoted tablet (TabletExternallyReparented),
// and, with the database's shard_user, the MySQL servers behind the tablets, whose old
// primary a failover fences (adapters/mysql) before it repoints. The fence locks the
// database's app_user there: for tablets that vttablet manages, the account vttablet
// serves queries as (vt_app by default).
type VitessConfig struct {
	// Vtctld is vtctld's gRPC address, host:port (its --grpc-port).
	Vtctld string `toml:"vtctld"`
	// CAFile verifies vtctld's certificate (vtctld serves TLS with --grpc-cert and
	// --grpc-key); CertFile and KeyFile are the client certificate vtctld asks for with
	// --grpc-ca; ServerName overrides the name checked in vtctld's certificate. Without
	// ca_file the connection is plaintext, which is refused off loopback unless the
	// database says insecure = true.
	CAFile     string `toml:"ca_file"`
	CertFile   string `toml:"cert_file"`
	KeyFile    string `toml:"key_file"`
	ServerName string `toml:"server_name"`
	// Timeout bounds every vtctld call (default 30s).
	Timeout Duration `toml:"timeout"`

	// A cutover of the keyspace is a Vitess Reshard (machine/vreshard), tuned here.
	// Cell is the cell whose serving graph the record mirrors (default zone1).
	Cell string `toml:"cell"`
	// Vtgate is vtgate's MySQL protocol address, host:port: after the writes switch, the
	// reshard reads every target shard through it and checks each row is on the shard the
	// record locates it on. VtgateUser and VtgatePasswordEnv log in (vtgate's
	// --mysql-auth-server-static-string user). Without vtgate a reshard is refused by its
	// plan. The session is plaintext: off loopback only with insecure = true.
	Vtgate            string `toml:"vtgate"`
	VtgateUser        string `toml:"vtgate_user"`
	VtgatePasswordEnv string `toml:"vtgate_password_env"`
	// MaxLag is the replication lag under which the copy counts as caught up (default 5s);
	// PollEvery how often the copy and the VDiff are asked again (default 1s).
	MaxLag    Duration `toml:"max_lag"`
	PollEvery Duration `toml:"poll_every"`
	// FinalizeAfter, when set, completes the Reshard that long after the writes switched
	// and vtgate's check passed, unless a rollback comes first (default: hold, ReverseTraffic
	// still possible, until `cutover finalize`).
	FinalizeAfter Duration `toml:"finalize_after"`
}

// cell is the reshard's cell.
func (v *VitessConfig) cell() string {
	if v.Cell == "" {
		return "zone1"
	}
	return v.Cell
}

// check validates the table at key (databases[i].vitess); insecure is the database's.
func (v *VitessConfig) check(key string, insecure bool) (string, string) {
	if v.Vtctld == "" {
		return key + ".vtctld", "give vtctld's gRPC address, e.g. vtctld = \"10.0.0.9:15999\""
	}
	host, _, err := net.SplitHostPort(v.Vtctld)
	if err != nil {
		return key + ".vtctld", fmt.Sprintf("%q is not host:port (%v)", v.Vtctld, err)
	}
	if (v.CertFile == "") != (v.KeyFile == "") {
		return key + ".cert_file", "give both cert_file and key_file (the client certificate) or neither"
	}
	if v.CAFile == "" && v.CertFile != "" {
		return key + ".ca_file", "a client certificate needs TLS: give ca_file, the CA that signed vtctld's certificate"
	}
	if v.CAFile == "" && !insecure && !isLoopback(host) {
		return key + ".ca_file", fmt.Sprintf("vtctld %s is off loopback and would be reached in plaintext; give ca_file (and cert_file, key_file when vtctld runs with --grpc-ca), or set insecure = true for development", v.Vtctld)
	}
	if v.Vtgate != "" {
		gh, _, err := net.SplitHostPort(v.Vtgate)
		switch {
		case err != nil:
			return key + ".vtgate", fmt.Sprintf("%q is not host:port (%v); give vtgate's MySQL protocol address (its --mysql-server-port)", v.Vtgate, err)
		case !insecure && !isLoopback(gh):
			return key + ".vtgate", fmt.Sprintf("vtgate %s is off loopback and its session would be plaintext; run the controller beside a vtgate (127.0.0.1), or set insecure = true for development", v.Vtgate)
		case v.VtgateUser == "":
			return key + ".vtgate_user", "give the vtgate user the reshard's check logs in as (vtgate_user, and vtgate_password_env)"
		}
	}
	return "", ""
}

// tls is the client's TLS configuration; nil for plaintext.
func (v *VitessConfig) tls() (*tls.Config, error) {
	if v.CAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(v.CAFile)
	if err != nil {
		return nil, fmt.Errorf("vitess.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("vitess.ca_file %s holds no PEM certificate", v.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: v.ServerName, MinVersion: tls.VersionTLS12}
	if v.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(v.CertFile, v.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("vitess.cert_file/key_file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// openVitess gives the fleet of a Vitess-routed database its vtctld client and, with
// shard_user, MySQL access to the shards' servers.
func openVitess(f *Fleet, dc *DatabaseConfig) error {
	tc, err := dc.Vitess.tls()
	if err != nil {
		return fmt.Errorf("databases %s: %w", dc.Name, err)
	}
	c, err := vtctld.Dial(vtctld.Config{Addr: dc.Vitess.Vtctld, TLS: tc, Timeout: dc.Vitess.Timeout.Duration})
	if err != nil {
		return fmt.Errorf("databases %s: %w", dc.Name, err)
	}
	f.Vitess, f.Workflows = c, c
	f.closers = append(f.closers, func() { _ = c.Close() })
	if dc.Vitess.Vtgate != "" {
		gc := mysql.NewConfig()
		gc.User, gc.Passwd, gc.Net, gc.Addr = dc.Vitess.VtgateUser, secret(dc.Vitess.VtgatePasswordEnv), "tcp", dc.Vitess.Vtgate
		gc.Timeout = 10 * time.Second
		conn, err := mysql.NewConnector(gc)
		if err != nil {
			return fmt.Errorf("databases %s: vitess.vtgate: %w", dc.Name, err)
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(4)
		f.Vtgate = db
		f.closers = append(f.closers, func() { _ = db.Close() })
	}
	if dc.ShardUser != "" {
		f.Dial = func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error) {
			return mysqladapter.Open(ctx, mysqlDSN(dc, b), mysqladapter.Options{})
		}
	}
	return nil
}

// mysqlDSN is how the controller logs into a Vitess shard's MySQL server: the record's host,
// port and database, shard_user and the password shard_password_env holds, with TLS as
// shard_sslmode says (disable: none; prefer, the default: when the server offers it;
// require: always, unverified; verify-ca and verify-full: always, verified).
func mysqlDSN(dc *DatabaseConfig, b shardmap.Backend) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net = dc.ShardUser, secret(dc.ShardPasswordEnv), "tcp"
	c.Addr, c.DBName = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), b.Database
	c.Timeout = 10 * time.Second
	switch dc.ShardSSLMode {
	case "disable":
		c.TLSConfig = "false"
	case "require":
		c.TLSConfig = "skip-verify"
	case "verify-ca", "verify-full":
		c.TLSConfig = "true"
	default:
		c.TLSConfig = "preferred"
	}
	return c.FormatDSN()
}
