package pglaunch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/internal/serverproc"
)

// Server is one running PostgreSQL server.
type Server struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// DataDir is the data directory; it and its parent are removed when the server stops.
	DataDir string
	// Standby tells whether the server was started by StartStandby and not promoted since
	// (whoever promotes it, with pg_promote, clears it).
	Standby bool

	primary *Server
	bin     string
	owner   owner
	root    string           // the private directory holding DataDir, the socket and the log
	proc    *serverproc.Proc // the postmaster
}

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 60 * time.Second

// Start starts a new primary server: a copy of this process's initdb template on a free
// port of 127.0.0.1, in a private temporary directory. Failures are returned (wrapping
// ErrNoBinaries when this machine has no PostgreSQL, ErrNoOwner when running as root
// without a "postgres" user to run it as, and quoting the server's log when it would not
// start); ctx bounds the wait for it to accept connections. Stopping it is the caller's:
// Close stops it and removes its files, Stop only stops it.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	o, err := currentOwner()
	if err != nil {
		return nil, err
	}
	tmpl, err := templateDir(bin, o)
	if err != nil {
		return nil, fmt.Errorf("pglaunch: making the template data directory with initdb: %w", err)
	}
	s, err := newServer(bin, o)
	if err != nil {
		return nil, err
	}
	if err := copyDataDir(o, tmpl, s.DataDir); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.configureAndStart(ctx, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// newServer makes the server's private directory.
func newServer(bin string, o owner) (*Server, error) {
	root, err := o.mkdir("loam-pglaunch-")
	if err != nil {
		return nil, err
	}
	return &Server{DataDir: filepath.Join(root, "data"), bin: bin, owner: o, root: root}, nil
}

// Close stops the server (fast shutdown) if it runs and removes its files.
func (s *Server) Close() error {
	err := s.shutdown()
	if rmErr := os.RemoveAll(s.root); rmErr != nil && err == nil {
		err = fmt.Errorf("pglaunch: removing %s: %w", s.root, rmErr)
	}
	return err
}

// configureAndStart writes the settings and starts the postmaster on a free port, trying
// again on another port if one was taken in the meantime by someone else.
func (s *Server) configureAndStart(ctx context.Context, opts []Option) error {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	settings := append(slices.Clone(throwawaySettings), c.settings...)
	if err := appendSettings(filepath.Join(s.DataDir, "postgresql.conf"), settings); err != nil {
		return err
	}
	var err error
	for range 5 {
		if err = s.startPostmaster(ctx); err == nil || !errors.Is(err, errPortTaken) {
			break
		}
	}
	return err
}

// appendSettings appends name = 'value' lines to a postgresql.conf.
func appendSettings(path string, settings [][2]string) error {
	var b strings.Builder
	b.WriteString("\n# pglaunch\n")
	for _, kv := range settings {
		fmt.Fprintf(&b, "%s = '%s'\n", kv[0], strings.ReplaceAll(kv[1], "'", "''"))
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pglaunch: writing settings: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("pglaunch: writing settings to %s: %w", path, err)
	}
	return f.Close()
}

var errPortTaken = errors.New("port taken")

func (s *Server) logPath() string { return filepath.Join(s.root, "postgres.log") }

// startPostmaster runs postgres in the background and waits until it accepts connections.
func (s *Server) startPostmaster(ctx context.Context) error {
	port, err := serverproc.FreePort()
	if err != nil {
		return fmt.Errorf("pglaunch: %w", err)
	}
	log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pglaunch: creating the server log: %w", err)
	}
	defer log.Close() // the child keeps its own descriptor
	cmd := s.owner.command(s.bin, "postgres", "-D", s.DataDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.root)
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("pglaunch: starting postgres: %w", err)
	}
	s.Port, s.proc = port, proc
	if err := s.waitReady(ctx); err != nil {
		proc.Kill()
		logText := s.logTail()
		if strings.Contains(logText, "Address already in use") {
			return fmt.Errorf("pglaunch: port %d: %w", port, errPortTaken)
		}
		return fmt.Errorf("%w\n--- server log (%s) ---\n%s", err, s.logPath(), logText)
	}
	return nil
}

// waitReady polls until the server accepts a connection, the postmaster exits, the
// timeout passes or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("pglaunch: postgres on port %d exited while starting (%v)", s.Port, s.proc.State())
		case <-ctx.Done():
			return fmt.Errorf("pglaunch: waiting for postgres on port %d to accept connections: %w", s.Port, ctx.Err())
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.DSN("postgres"))
		if err == nil {
			conn.Close(cctx)
			cancel()
			return nil
		}
		cancel()
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pglaunch: postgres on port %d not accepting connections after %v: %w", s.Port, startTimeout, last)
}

func (s *Server) logTail() string { return serverproc.LogTail(s.logPath()) }

// Stop shuts the server down now (fast shutdown: open sessions are ended, no data is lost)
// and keeps its files; Close removes them. Stopping twice is harmless.
func (s *Server) Stop() error { return s.shutdown() }

func (s *Server) shutdown() error {
	if s.proc == nil {
		return nil
	}
	if s.proc.Stop(syscall.SIGINT, 30*time.Second) { // fast shutdown
		return fmt.Errorf("pglaunch: postgres on port %d did not stop within 30s of SIGINT; killed it\n%s", s.Port, s.logTail())
	}
	return nil
}

// DSN is a superuser connection string for database on this server.
func (s *Server) DSN(database string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: "127.0.0.1:" + strconv.Itoa(s.Port),
		Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}

// Pid is the postmaster's process id (0 before it started), for a caller that watches the
// process itself.
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}
