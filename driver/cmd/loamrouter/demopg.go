package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The demo's own Postgres servers: throwaway, on 127.0.0.1, in a temporary directory, tuned
// for speed (fsync off), run as the postgres user when the demo runs as root (Postgres
// refuses root). conformance/pgtest does the same for tests; its launcher takes a
// testing.TB, so the demo carries this small one.

// demoPG is one running server.
type demoPG struct {
	name string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	cred *syscall.Credential
}

// postgresBin finds initdb and postgres: $LOAM_PG_BIN, else the newest Debian install.
func postgresBin() (string, error) {
	if d := os.Getenv("LOAM_PG_BIN"); d != "" {
		return d, checkPostgresBin(d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if checkPostgresBin(d) == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL binaries under /usr/lib/postgresql/*/bin (and LOAM_PG_BIN is unset)")
}

func checkPostgresBin(dir string) error {
	for _, p := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, p), err)
		}
	}
	return nil
}

// ensurePostgres finds the binaries, installing Debian's postgresql when they are missing and
// this process may (root, apt-get present); otherwise it says what to do.
func ensurePostgres(ctx context.Context, out io.Writer) (string, error) {
	bin, err := postgresBin()
	if err == nil {
		return bin, nil
	}
	apt, aptErr := exec.LookPath("apt-get")
	if os.Geteuid() != 0 || aptErr != nil {
		return "", fmt.Errorf("the demo needs PostgreSQL (%v): install it with `sudo apt-get install postgresql` (Debian/Ubuntu) and run `make demo` again, or set LOAM_PG_BIN to a directory holding initdb and postgres", err)
	}
	fmt.Fprintln(out, "PostgreSQL is not installed; installing Debian's postgresql package (apt-get install -y postgresql)...")
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "--no-install-recommends", "postgresql"}} {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, log.String())
		}
	}
	// The package may start its own cluster; the demo starts its own servers instead.
	_ = exec.Command("service", "postgresql", "stop").Run()
	return postgresBin()
}

// startDemoPG initialises a data directory under root and starts a server on a free port.
func startDemoPG(ctx context.Context, bin, root, name string, settings map[string]string) (*demoPG, error) {
	s := &demoPG{name: name, dir: filepath.Join(root, name), done: make(chan struct{})}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, Postgres must run as the postgres user, which does not exist (%w): create it or run the demo as another user", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(root, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.command(bin, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb for %s: %w\n%s", name, err, out)
	}
	conf := "\n# loamrouter demo\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
	for k, v := range settings {
		conf += fmt.Sprintf("%s = '%s'\n", k, v)
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	log, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	if s.cred != nil {
		_ = os.Chown(log.Name(), int(s.cred.Uid), int(s.cred.Gid))
	}
	s.cmd = s.command(bin, "postgres", "-D", data, "-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting postgres for %s: %w", name, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, s.dsn("postgres"))
		cancel()
		if err == nil {
			conn.Close(ctx)
			return s, nil
		}
		select {
		case <-s.done:
			tail, _ := os.ReadFile(log.Name())
			return nil, fmt.Errorf("postgres %s exited while starting:\n%s", name, tail)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("postgres %s did not accept connections: %w", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *demoPG) command(bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	return cmd
}

func (s *demoPG) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// exec runs statements as the superuser.
func (s *demoPG) exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, s.dsn(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// stop shuts the server down fast (SIGINT), killing it if it takes too long.
func (s *demoPG) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
