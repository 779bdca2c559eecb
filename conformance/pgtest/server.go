package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/pglaunch"
)

// EnvRequireReal, set to 1, turns every "skipped: needs postgres" into a test failure; CI
// sets it so that a missing server cannot pass as a green run.
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// Server is one running PostgreSQL server (a pglaunch.Server: Port, DataDir, DSN, Stop,
// Close) with the helpers a test uses on it, which fail the test instead of returning
// errors.
type Server struct {
	*pglaunch.Server

	primary *Server
}

// Option configures a server started by Start, StartStandby or NewShared: pglaunch's
// options (WithSetting, WithSettings).
type Option = pglaunch.Option

// WithSetting adds a postgresql.conf setting; see pglaunch.WithSetting.
func WithSetting(name, value string) Option { return pglaunch.WithSetting(name, value) }

// WithSettings adds several settings; see pglaunch.WithSettings.
func WithSettings(settings map[string]string) Option { return pglaunch.WithSettings(settings) }

// RemoveTemplate deletes this process's template data directory (pglaunch.RemoveTemplate);
// call it from TestMain after m.Run.
func RemoveTemplate() { pglaunch.RemoveTemplate() }

// Start starts a new primary server and registers its fast shutdown and removal with
// t.Cleanup. Without PostgreSQL binaries it skips the test (fails it under
// LOAM_REQUIRE_REAL=1); any other failure fails the test, quoting the server's log.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := pglaunch.Start(context.Background(), opts...)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return &Server{Server: s}
}

// fail ends a test whose server could not start: a skip where this machine cannot run one
// at all, a failure otherwise.
func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, pglaunch.ErrNoBinaries) || errors.Is(err, pglaunch.ErrNoOwner) {
		missing(t, err)
	}
	t.Fatal(err)
}

// missing ends a test that needs a real Postgres it cannot have.
func missing(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("skipped: needs postgres (%v)", err)
	if os.Getenv(EnvRequireReal) == "1" {
		t.Fatalf("%s; failing instead because %s=1", msg, EnvRequireReal)
	}
	t.Skip(msg)
}

// Connect opens a superuser connection to database, closed when the test ends.
func (s *Server) Connect(t testing.TB, database string) *pgx.Conn {
	t.Helper()
	conn := s.connect(t, database)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// connect opens a connection the caller closes.
func (s *Server) connect(t testing.TB, database string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN(database))
	if err != nil {
		t.Fatalf("pgtest: connecting to database %q on port %d: %v", database, s.Port, err)
	}
	return conn
}

// Exec runs SQL statements (simple protocol, so several may be separated by semicolons) on
// database as the superuser, on a connection of their own, failing the test on error.
func (s *Server) Exec(t testing.TB, database, sql string) {
	t.Helper()
	conn := s.connect(t, database)
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("pgtest: on %q, port %d: %s: %v", database, s.Port, sql, err)
	}
}

// QueryString runs a query returning one value, scanned as text, on a connection of its own,
// failing the test on error.
func (s *Server) QueryString(t testing.TB, database, sql string, args ...any) string {
	t.Helper()
	conn := s.connect(t, database)
	defer conn.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&out); err != nil {
		t.Fatalf("pgtest: on %q, port %d: %s: %v", database, s.Port, sql, err)
	}
	return out
}

// CreateDatabase creates a database (UTF8, C collation, like the template) on a primary.
func (s *Server) CreateDatabase(t testing.TB, name string) {
	t.Helper()
	s.Exec(t, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}
