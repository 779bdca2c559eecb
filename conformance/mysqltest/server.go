package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	mysqladapter "loam.dev/router/adapters/mysql"

	"loam.dev/router/internal/serverproc"
)

// Server is one running MariaDB server.
type Server struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// DataDir is the data directory; it and its parent are removed when the server stops.
	DataDir string
	// ServerID is the server's server_id, unique among the servers of this process.
	ServerID int

	primary *Server
	bins    Binaries
	root    string           // the private directory holding DataDir, the socket and the log
	proc    *serverproc.Proc // mariadbd
}

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// serverIDs hands out server_id values: replication needs them distinct.
var serverIDs atomic.Int64

// Start starts a new primary server and registers its shutdown and removal with t.Cleanup.
// Without MariaDB it skips the test (fails it under LOAM_REQUIRE_REAL=1); any other failure
// fails the test, quoting the server's error log.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := start(nil, opts)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}

// fail ends a test whose server could not start: a skip where this machine cannot run one
// at all, a failure otherwise.
func fail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) {
		missing(t, err)
	}
	t.Fatal(err)
}

func start(primary *Server, opts []Option) (*Server, error) {
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	tmpl, err := templateDir(bins)
	if err != nil {
		return nil, fmt.Errorf("mysqltest: making the template data directory with mariadb-install-db: %w", err)
	}
	root, err := os.MkdirTemp("", "loam-mysqltest-")
	if err != nil {
		return nil, fmt.Errorf("mysqltest: making a directory under %s: %w", os.TempDir(), err)
	}
	s := &Server{DataDir: filepath.Join(root, "data"), ServerID: int(serverIDs.Add(1)), primary: primary, bins: bins, root: root}
	if err := run("cp", "-a", tmpl, s.DataDir); err != nil {
		s.Close()
		return nil, fmt.Errorf("mysqltest: copying the template data directory: %w", err)
	}
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	for range 5 {
		if err = s.startServer(c.flags); err == nil || !errors.Is(err, errPortTaken) {
			break
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close shuts the server down if it runs and removes its files. Start's cleanup calls it;
// call it yourself only for a server you got from a Shared.
func (s *Server) Close() error {
	err := s.shutdown()
	if rmErr := os.RemoveAll(s.root); rmErr != nil && err == nil {
		err = fmt.Errorf("mysqltest: removing %s: %w", s.root, rmErr)
	}
	return err
}

var errPortTaken = errors.New("port taken")

// pickPort chooses a server's port; tests replace it to force a clash.
var pickPort = serverproc.FreePort

func (s *Server) logPath() string { return filepath.Join(s.root, "error.log") }

// command prepares a MariaDB program. --no-defaults must come first. Pdeathsig kills the
// server if the test process dies first, so an interrupted go test leaves none behind.
func command(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, append([]string{"--no-defaults"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	return cmd
}

// asRoot is the option mariadbd needs to run as root; nothing otherwise.
func asRoot() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// startServer runs mariadbd in the background and waits until it accepts connections.
func (s *Server) startServer(extra []string) error {
	port, err := pickPort()
	if err != nil {
		return fmt.Errorf("mysqltest: %w", err)
	}
	args := append(asRoot(),
		"--datadir="+s.DataDir,
		"--bind-address=127.0.0.1",
		"--port="+strconv.Itoa(port),
		"--socket="+filepath.Join(s.root, "mysqld.sock"),
		"--pid-file="+filepath.Join(s.root, "mysqld.pid"),
		"--log-error="+s.logPath(),
		"--tmpdir="+s.root, // private: a starting server deletes every #sql temporary file in its tmpdir
		"--server-id="+strconv.Itoa(s.ServerID),
	)
	args = append(args, testFlags...)
	args = append(args, extra...)
	os.Remove(s.logPath())
	cmd := command(s.bins.Server, args...)
	proc, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("mysqltest: starting %s: %w", s.bins.Server, err)
	}
	s.Port, s.proc = port, proc
	if err := s.waitReady(); err != nil {
		proc.Kill()
		logText := s.logTail()
		if strings.Contains(logText, "Address already in use") || strings.Contains(logText, "Do you already have another server running on port") {
			return fmt.Errorf("mysqltest: port %d: %w", port, errPortTaken)
		}
		return fmt.Errorf("%w\n--- server log (%s) ---\n%s", err, s.logPath(), logText)
	}
	return nil
}

// waitReady polls until the server accepts a connection, mariadbd exits, or the timeout
// passes.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("mysqltest: mariadbd on port %d exited while starting (%v)", s.Port, s.proc.State())
		default:
		}
		if last = s.ping(); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("mysqltest: mariadbd on port %d not accepting connections after %v: %w", s.Port, startTimeout, last)
}

// ping checks that the server on s.Port answers and is this one: between freePort and
// mariadbd's bind another test process can start its own server on the same port, and a
// root login there would succeed too.
func (s *Server) ping() error {
	db, err := sql.Open("mysql", s.RootDSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var dir string
	if err := db.QueryRowContext(ctx, "SELECT @@datadir").Scan(&dir); err != nil {
		return err
	}
	if filepath.Clean(dir) != filepath.Clean(s.DataDir) {
		return fmt.Errorf("port %d is served by another server (datadir %s)", s.Port, dir)
	}
	return nil
}

func (s *Server) logTail() string { return serverproc.LogTail(s.logPath()) }

// Stop shuts the server down now (open connections are ended; committed data stays); the
// cleanup registered by Start then only removes its files. Stopping twice is harmless.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.shutdown(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) shutdown() error {
	if s.proc == nil {
		return nil
	}
	if s.proc.Stop(syscall.SIGTERM, 30*time.Second) { // normal shutdown
		return fmt.Errorf("mysqltest: mariadbd on port %d did not stop within 30s of SIGTERM; killed it\n%s", s.Port, s.logTail())
	}
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// DSN is a go-sql-driver/mysql data source name for user with password on database ("" for
// none).
func (s *Server) DSN(user, password, database string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", s.Addr(), database
	c.TLSConfig = "false" // the test servers listen on loopback without TLS (see WithTLS)
	c.Timeout = 10 * time.Second
	return c.FormatDSN()
}

// RootDSN is DSN for root, who has every privilege and no password.
func (s *Server) RootDSN(database string) string { return s.DSN("root", "", database) }

// connect opens a root connection pool the caller closes.
func (s *Server) connect(t testing.TB, database string, multi bool) *sql.DB {
	t.Helper()
	c, err := mysql.ParseDSN(s.RootDSN(database))
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	c.MultiStatements = multi
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	return sql.OpenDB(conn)
}

// Exec runs SQL statements (several may be separated by semicolons) on database ("" for
// none) as root, on a connection of their own, failing the test on error.
func (s *Server) Exec(t testing.TB, database, stmts string) {
	t.Helper()
	db := s.connect(t, database, true)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmts); err != nil {
		t.Fatalf("mysqltest: on %q, port %d: %s: %v", database, s.Port, stmts, err)
	}
}

// QueryString runs a query returning one value, as text ("" for NULL), as root on a
// connection of its own, failing the test on error.
func (s *Server) QueryString(t testing.TB, query string, args ...any) string {
	t.Helper()
	db := s.connect(t, "", false)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out sql.NullString
	if err := db.QueryRowContext(ctx, query, args...).Scan(&out); err != nil {
		t.Fatalf("mysqltest: port %d: %s: %v", s.Port, query, err)
	}
	return out.String
}

// CreateDatabase creates a database.
func (s *Server) CreateDatabase(t testing.TB, name string) {
	t.Helper()
	s.Exec(t, "", "CREATE DATABASE "+mysqladapter.QuoteIdent(name))
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
