package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/pgtest"
)

// serverSettings are what the suite needs of a server: prepared transactions, and room for
// the fence benchmark's 50 sessions beside everyone else's.
var serverSettings = []pgtest.Option{
	pgtest.WithSetting("max_prepared_transactions", "64"),
	pgtest.WithSetting("max_connections", "150"),
}

var envSeq atomic.Int64

// dsnAs is s's connection string for database, logging in as role.
func dsnAs(s *pgtest.Server, database, role string) string {
	u, err := url.Parse(s.DSN(database))
	if err != nil {
		panic(err)
	}
	u.User = url.User(role)
	return u.String()
}

// adminExec runs statements as the superuser, failing the case on error.
func adminExec(t conformance.TB, s *pgtest.Server, database string, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.DSN(database))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), sql, args...)
	require.NoError(t, err, "%s", sql)
}

// harness serves the backend suite from one server: each env is a fresh database with fresh
// roles (roles are per server, so their names carry the env's number). mutant, when set,
// is switched on in every Backend it opens.
func harness(s *pgtest.Server, standby *pgtest.Server, mutant string) conformance.BackendHarness {
	h := conformance.BackendHarness{
		Members: true,
		Open: func(t conformance.TB) *conformance.BackendEnv {
			return openEnv(t, s, mutant)
		},
	}
	if standby != nil {
		h.OpenStandby = func(t conformance.TB) adapters.ShardBackend {
			b, err := postgres.Open(t.Context(), standby.DSN("postgres"), postgres.Options{})
			require.NoError(t, err)
			t.Cleanup(b.Close)
			if mutant != "" {
				postgres.Mutate(b, mutant)
			}
			return b
		}
	}
	return h
}

// envRoles are the roles of one env.
type envRoles struct{ app, member, other string }

func newEnvDB(t conformance.TB, s *pgtest.Server) (string, envRoles) {
	t.Helper()
	n := envSeq.Add(1)
	db := fmt.Sprintf("env_%d", n)
	r := envRoles{app: fmt.Sprintf("app_%d", n), member: fmt.Sprintf("member_%d", n), other: fmt.Sprintf("other_%d", n)}
	adminExec(t, s, "postgres", "CREATE DATABASE "+pgx.Identifier{db}.Sanitize())
	adminExec(t, s, "postgres", fmt.Sprintf("CREATE ROLE %s LOGIN; CREATE ROLE %s LOGIN NOINHERIT; CREATE ROLE %s LOGIN; GRANT %s TO %s",
		r.app, r.member, r.other, r.app, r.member))
	adminExec(t, s, db, "CREATE TABLE items (id bigint, v text)")
	adminExec(t, s, db, fmt.Sprintf("GRANT SELECT, INSERT ON items TO %s, %s, %s", r.app, r.member, r.other))
	return db, r
}

func openEnv(t conformance.TB, s *pgtest.Server, mutant string) *conformance.BackendEnv {
	t.Helper()
	db, r := newEnvDB(t, s)
	b, err := postgres.Open(t.Context(), s.DSN(db), postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	if mutant != "" {
		postgres.Mutate(b, mutant)
	}
	admin := func(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, s.DSN(db)) }
	return &conformance.BackendEnv{
		Backend: b,
		Role:    r.app,
		Member:  r.member,
		Other:   r.other,
		Table:   "items",
		Login: func(ctx context.Context, role string) (conformance.AppSession, error) {
			return login(ctx, s, db, role, r)
		},
		Load: func(ctx context.Context, table string, rows []conformance.BackendRow) error {
			conn, err := admin(ctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+pgx.Identifier{table}.Sanitize()+" (id bigint, v text)"); err != nil {
				return err
			}
			_, err = conn.CopyFrom(ctx, pgx.Identifier{table}, []string{"id", "v"}, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
				return []any{rows[i].ID, rows[i].V}, nil
			}))
			return err
		},
		Rows: func(ctx context.Context, table string) ([]conformance.BackendRow, error) {
			conn, err := admin(ctx)
			if err != nil {
				return nil, err
			}
			defer conn.Close(context.Background())
			rows, err := conn.Query(ctx, "SELECT id, v FROM "+pgx.Identifier{table}.Sanitize()+" ORDER BY id, v")
			if err != nil {
				return nil, err
			}
			return pgx.CollectRows(rows, func(row pgx.CollectableRow) (conformance.BackendRow, error) {
				var r conformance.BackendRow
				err := row.Scan(&r.ID, &r.V)
				return r, err
			})
		},
		Prepare: func(ctx context.Context, gid string, row conformance.BackendRow) error {
			conn, err := pgx.Connect(ctx, dsnAs(s, db, r.app))
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
				return err
			}
			if _, err := conn.Exec(ctx, "INSERT INTO items (id, v) VALUES ($1, $2)", row.ID, row.V); err != nil {
				return err
			}
			_, err = conn.Exec(ctx, "PREPARE TRANSACTION $1", pgx.QueryExecModeSimpleProtocol, gid)
			return err
		},
		Now: time.Now,
	}
}

// appSession is an application's session: a pgx connection as one role, its errors
// classified as a router would classify them.
type appSession struct {
	conn *pgx.Conn
	tx   pgx.Tx
	name string
}

func login(ctx context.Context, s *pgtest.Server, db, role string, r envRoles) (conformance.AppSession, error) {
	name := fmt.Sprintf("127.0.0.1:%d", s.Port)
	conn, err := pgx.Connect(ctx, dsnAs(s, db, role))
	if err != nil {
		return nil, postgres.Classify(name, "Login", err)
	}
	if role == r.member {
		if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{r.app}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, postgres.Classify(name, "Login", err)
		}
	}
	return &appSession{conn: conn, name: name}, nil
}

func (a *appSession) Insert(ctx context.Context, r conformance.BackendRow) error {
	const q = "INSERT INTO items (id, v) VALUES ($1, $2)"
	var err error
	if a.tx != nil {
		_, err = a.tx.Exec(ctx, q, r.ID, r.V)
	} else {
		_, err = a.conn.Exec(ctx, q, r.ID, r.V)
	}
	return postgres.Classify(a.name, "Insert", err)
}

func (a *appSession) Begin(ctx context.Context) error {
	tx, err := a.conn.Begin(ctx)
	a.tx = tx
	return postgres.Classify(a.name, "Begin", err)
}

func (a *appSession) Commit(ctx context.Context) error {
	err := a.tx.Commit(ctx)
	a.tx = nil
	return postgres.Classify(a.name, "Commit", err)
}

func (a *appSession) Close() { a.conn.Close(context.Background()) }
