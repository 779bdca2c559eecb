package mysql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/mysqltest"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
)

// appPassword is every test account's password.
const appPassword = "app-pw"

var envSeq atomic.Int64

// quiet is the driver's logger for sessions the tests expect to be killed: the driver would
// print "unexpected EOF" for each.
type quiet struct{}

func (quiet) Print(...any) {}

// codes are the MySQL numbers of what the backend suite provokes: a locked account's login,
// and a missing table. A killed session carries no number.
var codes = conformance.BackendCodes{LoginRefused: mysqlad.CodeAccountLocked, SessionEnded: "", UndefinedTable: mysqlad.CodeNoSuchTable}

// lacks declares what MySQL does not have that some backend cases need.
var lacks = map[string]string{
	"member": "MySQL accounts do not act as one another: a role granted to another account gives it privileges, not the " +
		"fenced account's identity, and there is no SET ROLE to a user; FenceWrites covers every host entry of the user instead",
	"prepared-metadata": "XA RECOVER reports no owner, database or prepare time of a branch",
}

// vindexScheme is the suite's scheme for a Vitess shard: the hash vindex on id over n even
// keyspace-ID ranges, as vtctl names them.
func vindexScheme(n uint32) shardmap.Scheme {
	ranges, err := keyrange.Split(keyrange.Full(), int(n))
	if err != nil {
		panic(err)
	}
	return shardmap.Vindex{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Kind: shardmap.VindexHash, Ranges: ranges}
}

// harness serves the backend suite from one server: each env is a fresh database with fresh
// users. mutant, when set, is switched on in every Backend it opens.
func harness(s *mysqltest.Server, replica *mysqltest.Server, mutant string) conformance.BackendHarness {
	h := conformance.BackendHarness{
		Lacks:            lacks,
		Codes:            &codes,
		ComparePositions: mysqlad.ComparePositions,
		Scheme:           vindexScheme,
		Open:             func(t conformance.TB) *conformance.BackendEnv { return openEnv(t, s, mutant) },
	}
	if replica != nil {
		h.OpenStandby = func(t conformance.TB) adapters.ShardBackend {
			return openBackend(t, replica, replica.RootDSN(""), mutant)
		}
	}
	return h
}

func openBackend(t conformance.TB, s *mysqltest.Server, dsn, mutant string) *mysqlad.Backend {
	t.Helper()
	// The test servers listen on loopback without TLS: insecure, said so.
	b, err := mysqlad.Open(t.Context(), dsn, mysqlad.Options{Insecure: true})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	if mutant != "" {
		mysqlad.Mutate(b, mutant)
	}
	return b
}

// adminExec runs statements as root, failing the case on error.
func adminExec(t conformance.TB, s *mysqltest.Server, database string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("mysql", s.RootDSN(database))
	require.NoError(t, err)
	defer db.Close()
	for _, q := range stmts {
		_, err = db.ExecContext(context.Background(), q)
		require.NoError(t, err, "%s", q)
	}
}

// envUsers are the accounts of one env.
type envUsers struct{ db, app, other string }

func newEnvDB(t conformance.TB, s *mysqltest.Server) envUsers {
	t.Helper()
	n := envSeq.Add(1)
	u := envUsers{db: fmt.Sprintf("env_%d", n), app: fmt.Sprintf("app_%d", n), other: fmt.Sprintf("other_%d", n)}
	adminExec(t, s, "",
		"CREATE DATABASE "+mysqlad.QuoteIdent(u.db),
		"CREATE TABLE "+mysqlad.QuoteIdent(u.db)+".items (id bigint, v text) ENGINE = InnoDB")
	for _, user := range []string{u.app, u.other} {
		adminExec(t, s, "",
			fmt.Sprintf("CREATE USER %s@'%%' IDENTIFIED BY '%s'", mysqlad.QuoteIdent(user), appPassword),
			fmt.Sprintf("GRANT SELECT, INSERT ON %s.items TO %s@'%%'", mysqlad.QuoteIdent(u.db), mysqlad.QuoteIdent(user)))
	}
	return u
}

// connector is a connector logging in as user to the env's database, quietly.
func connector(s *mysqltest.Server, db, user string) driver.Connector {
	cfg, err := mysql.ParseDSN(s.DSN(user, appPassword, db))
	if err != nil {
		panic(err)
	}
	cfg.Logger = quiet{}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	return c
}

func openEnv(t conformance.TB, s *mysqltest.Server, mutant string) *conformance.BackendEnv {
	t.Helper()
	u := newEnvDB(t, s)
	b := openBackend(t, s, s.RootDSN(u.db), mutant)
	var mu sync.Mutex
	var prepared []string
	t.Cleanup(func() {
		// XA branches are the server's, not the database's: end this env's so the next
		// env's list starts empty.
		mu.Lock()
		defer mu.Unlock()
		for _, gid := range prepared {
			adminExec(t, s, "", "XA ROLLBACK X'"+hex.EncodeToString([]byte(gid))+"'")
		}
	})
	admin := func() (*sql.DB, error) { return sql.Open("mysql", s.RootDSN(u.db)) }
	return &conformance.BackendEnv{
		Backend: b,
		Role:    u.app,
		Other:   u.other,
		Table:   "items",
		Login: func(ctx context.Context, user string) (conformance.AppSession, error) {
			return login(ctx, s, u.db, user)
		},
		Load: func(ctx context.Context, table string, rows []conformance.BackendRow) error {
			db, err := admin()
			if err != nil {
				return err
			}
			defer db.Close()
			ident := mysqlad.QuoteIdent(table)
			if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+ident+" (id bigint, v text) ENGINE = InnoDB"); err != nil {
				return err
			}
			// No primary key: InnoDB keeps rows in insertion order, the order asked for.
			for len(rows) > 0 {
				batch := rows[:min(len(rows), 100)]
				rows = rows[len(batch):]
				args := make([]any, 0, 2*len(batch))
				for _, r := range batch {
					args = append(args, r.ID, r.V)
				}
				q := "INSERT INTO " + ident + " (id, v) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?), ", len(batch)), ", ")
				if _, err := db.ExecContext(ctx, q, args...); err != nil {
					return err
				}
			}
			return nil
		},
		Rows: func(ctx context.Context, table string) ([]conformance.BackendRow, error) {
			db, err := admin()
			if err != nil {
				return nil, err
			}
			defer db.Close()
			rows, err := db.QueryContext(ctx, "SELECT id, v FROM "+mysqlad.QuoteIdent(table)+" ORDER BY id, v")
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			var out []conformance.BackendRow
			for rows.Next() {
				var r conformance.BackendRow
				if err := rows.Scan(&r.ID, &r.V); err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, rows.Err()
		},
		Prepare: func(ctx context.Context, gid string, r conformance.BackendRow) error {
			db := sql.OpenDB(connector(s, u.db, u.app))
			defer db.Close()
			conn, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			var id uint64
			if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				conn.Close()
				return err
			}
			xid := "X'" + hex.EncodeToString([]byte(gid)) + "'"
			for _, q := range []string{"XA START " + xid, "INSERT INTO items (id, v) VALUES (?, ?)", "XA END " + xid, "XA PREPARE " + xid} {
				var args []any
				if strings.HasPrefix(q, "INSERT") {
					args = []any{r.ID, r.V}
				}
				if _, err := conn.ExecContext(ctx, q, args...); err != nil {
					conn.Close()
					return err
				}
			}
			mu.Lock()
			prepared = append(prepared, gid)
			mu.Unlock()
			// Drop the connection rather than pool it: the branch is detached and stays
			// prepared, as a coordinator's branch does once its session is gone.
			conn.Raw(func(any) error { return driver.ErrBadConn })
			conn.Close() // "already closed": the Raw call closed it
			return waitGone(ctx, s, id)
		},
		Now: time.Now,
	}
}

// appSession is an application's session: one pinned connection as one user, its errors
// classified as a router would classify them (ClassifySession, with a fresh login to tell a
// fence from other lost connections).
type appSession struct {
	db   *sql.DB
	conn *sql.Conn
	tx   *sql.Tx
	re   driver.Connector
	name string
}

func login(ctx context.Context, s *mysqltest.Server, db, user string) (conformance.AppSession, error) {
	c := connector(s, db, user)
	pool := sql.OpenDB(c)
	conn, err := pool.Conn(ctx)
	if err != nil {
		pool.Close()
		return nil, mysqlad.Classify(s.Addr(), "Login", err)
	}
	return &appSession{db: pool, conn: conn, re: c, name: s.Addr()}, nil
}

func (a *appSession) classify(ctx context.Context, op string, err error) error {
	return mysqlad.ClassifySession(ctx, a.name, op, err, a.re)
}

func (a *appSession) Insert(ctx context.Context, r conformance.BackendRow) error {
	const q = "INSERT INTO items (id, v) VALUES (?, ?)"
	var err error
	if a.tx != nil {
		_, err = a.tx.ExecContext(ctx, q, r.ID, r.V)
	} else {
		_, err = a.conn.ExecContext(ctx, q, r.ID, r.V)
	}
	return a.classify(ctx, "Insert", err)
}

func (a *appSession) Begin(ctx context.Context) error {
	tx, err := a.conn.BeginTx(ctx, nil)
	a.tx = tx
	return a.classify(ctx, "Begin", err)
}

func (a *appSession) Commit(ctx context.Context) error {
	err := a.tx.Commit()
	a.tx = nil
	return a.classify(ctx, "Commit", err)
}

func (a *appSession) Close() {
	a.conn.Close()
	a.db.Close()
}

// openSQL opens a pool for dsn, closed when the test ends.
func openSQL(t conformance.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// waitGone waits until connection id has left the server: only then is an XA branch it
// prepared detached, so that another connection can see it end (1397 before).
func waitGone(ctx context.Context, s *mysqltest.Server, id uint64) error {
	db, err := sql.Open("mysql", s.RootDSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connection %d still on the server: %w", id, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
