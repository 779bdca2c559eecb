package postgres

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"loam.dev/router/adapters"
)

// Options configures a Backend. The zero value is usable.
type Options struct {
	// TLS, when set, is used for every connection, whatever sslmode the connection string
	// says, and with no plaintext fallback. Leave it nil to follow the connection string
	// (sslmode, sslrootcert, ...); a connection string that names no sslmode (and no
	// PGSSLMODE in the environment) is sslmode=verify-full.
	TLS *tls.Config
	// Insecure lets a password go to a server whose certificate is not verified (sslmode
	// disable, allow, prefer or require without a root certificate): development only.
	// Without it Open refuses such a login with ErrUnverifiedPassword before connecting,
	// so a record pointing at a host of someone else's cannot collect the administrator's
	// password.
	Insecure bool
	// MaxConns bounds the Backend's connection pool; default 4. FenceWrites holds one
	// connection for its whole run.
	MaxConns int32
	// Settle is how long after NOLOGIN committed FenceWrites must still find no session of
	// the fenced roles before it returns; default 50ms. A login that passed its NOLOGIN check
	// just before the commit shows in pg_stat_activity only once its startup is done, and
	// this is the time it is given to show up and be ended.
	Settle time.Duration
	// DrainTimeout bounds AwaitSlotDrain; default 30 s (DefaultDrainTimeout). Writes wait
	// in the pause for as long: the stream must apply what it holds well within it.
	DrainTimeout time.Duration
	// DrainPoll is AwaitSlotDrain's interval between reads of the slots' positions;
	// default 5 ms (DefaultDrainPoll).
	DrainPoll time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	if o.Settle <= 0 {
		o.Settle = 50 * time.Millisecond
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.DrainPoll <= 0 {
		o.DrainPoll = DefaultDrainPoll
	}
	return o
}

// Backend is a ShardBackend for one Postgres server, reached as an administrator: a
// superuser, or a role with CREATEROLE, pg_signal_backend and SET on the parameter
// loam.fenced_by (GRANT SET ON PARAMETER loam.fenced_by TO …), and best pg_read_all_stats
// too (without it other roles' walsenders cannot be told from their client sessions, and
// the fence ends both). It is safe for concurrent use.
type Backend struct {
	name string
	pool *pgxpool.Pool
	opt  Options
	mut  mutation
}

var _ adapters.ShardBackend = (*Backend)(nil)

// Open connects to the server of connString (a URL or key=value string as pgx reads it,
// naming the shard's database) and checks that it answers. Close the Backend when done.
func Open(ctx context.Context, connString string, opt Options) (*Backend, error) {
	opt = opt.withDefaults()
	cfg, err := pgxpool.ParseConfig(withVerifyFull(connString))
	if err != nil {
		return nil, fmt.Errorf("postgres: reading the connection string: %w", err)
	}
	cc := cfg.ConnConfig
	if opt.TLS != nil {
		cc.TLSConfig = opt.TLS.Clone()
		for _, fb := range cc.Fallbacks {
			fb.TLSConfig = opt.TLS.Clone()
		}
	}
	cfg.MaxConns = opt.MaxConns
	name := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	if cc.Password != "" && !opt.Insecure {
		if !verified(cc.TLSConfig) {
			return nil, fmt.Errorf("postgres: %s: %w: the connection string's sslmode does not verify the server (use sslmode=verify-full with sslrootcert naming the servers' CA, or set insecure for a development database)", name, ErrUnverifiedPassword)
		}
		// sslmode prefer and allow fall back to plaintext: never with a password.
		fbs := cc.Fallbacks[:0]
		for _, fb := range cc.Fallbacks {
			if verified(fb.TLSConfig) {
				fbs = append(fbs, fb)
			}
		}
		cc.Fallbacks = fbs
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, Classify(name, "Open", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, Classify(name, "Open", fmt.Errorf("connecting to %s as %q: %w", name, cc.User, err))
	}
	return &Backend{name: name, pool: pool, opt: opt}, nil
}

// ErrUnverifiedPassword: Open was asked to send a password to a server it would not verify
// (no TLS, or TLS without checking the certificate), and refused.
var ErrUnverifiedPassword = errors.New("postgres: refusing to send a password to a server whose certificate is not verified")

// verified reports whether a connection with c checks the server's certificate.
func verified(c *tls.Config) bool {
	return c != nil && (!c.InsecureSkipVerify || c.VerifyPeerCertificate != nil || c.VerifyConnection != nil)
}

// withVerifyFull adds sslmode=verify-full to a connection string that names no sslmode
// (pgx's default is prefer, which verifies nothing and falls back to plaintext).
func withVerifyFull(connString string) string {
	if os.Getenv("PGSSLMODE") != "" {
		return connString
	}
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil || u.Query().Has("sslmode") {
			return connString // a parse error is reported by pgx
		}
		q := u.Query()
		q.Set("sslmode", "verify-full")
		u.RawQuery = q.Encode()
		return u.String()
	}
	for _, kv := range strings.Fields(connString) {
		if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == "sslmode" {
			return connString
		}
	}
	if strings.Contains(connString, "sslmode") {
		return connString // sslmode = x with spaces: pgx reads it
	}
	return strings.TrimSpace(connString + " sslmode=verify-full")
}

// Name is the server's host:port, as errors name it.
func (b *Backend) Name() string { return b.name }

// Close closes the Backend's connections.
func (b *Backend) Close() { b.pool.Close() }

// fail wraps err as this backend's error for op.
func (b *Backend) fail(op string, err error) error { return Classify(b.name, op, err) }

// failf is fail with a message of the Backend's own and no SQLSTATE.
func (b *Backend) failf(op, code, format string, a ...any) error {
	return &adapters.BackendError{Backend: b.name, Op: op, Code: code, Err: fmt.Errorf(format, a...)}
}

// statusQuery reads role, read-only state, positions and lag in one round trip. The CASEs
// keep pg_current_wal_lsn() from running on a standby, where it fails (55000).
//
// Lag is the age of the last replayed transaction while the standby has received WAL it has
// not replayed, and 0 once replay has caught up with what was received: an idle primary
// must not read as a lagging standby. A standby that has replayed no transaction since it
// started has no such age and reports 0.
const statusQuery = `SELECT r,
  current_setting('default_transaction_read_only') = 'on',
  (CASE WHEN r THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END)::text,
  (CASE WHEN r THEN pg_last_wal_replay_lsn() END)::text,
  (CASE WHEN NOT r THEN 0
        WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn() THEN 0
        ELSE COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000000, 0)
   END)::int8
FROM (SELECT pg_is_in_recovery() AS r) AS s`

// Status reports the server's role (a standby is in recovery), whether it refuses writes (a
// standby, or default_transaction_read_only on for this database and role), the write
// position (a standby: the received position) and a standby's replay position and lag.
func (b *Backend) Status(ctx context.Context) (adapters.BackendStatus, error) {
	var (
		inRecovery, ro bool
		pos, replayed  *string
		lagMicros      int64
	)
	err := b.pool.QueryRow(ctx, statusQuery).Scan(&inRecovery, &ro, &pos, &replayed, &lagMicros)
	if err != nil {
		return adapters.BackendStatus{}, b.fail("Status", err)
	}
	st := adapters.BackendStatus{Role: adapters.RolePrimary, ReadOnly: ro, Lag: time.Duration(lagMicros) * time.Microsecond}
	if inRecovery || b.mut&mutStatusStandby != 0 {
		st.Role, st.ReadOnly = adapters.RoleStandby, true
	}
	if pos != nil {
		st.Position = *pos
	}
	if replayed != nil {
		st.Replayed = *replayed
	}
	return st, nil
}
