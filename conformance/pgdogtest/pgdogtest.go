package pgdogtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"loam.dev/router/adapters/configmap"
	"loam.dev/router/internal/serverproc"
	"loam.dev/router/kernel/render"
	"loam.dev/router/pglaunch"
)

// EnvBin names the PgDog binary the tests run.
const EnvBin = "LOAM_PGDOG_BIN"

// SkipMessage starts the message of every test skipped for want of PgDog.
const SkipMessage = "skipped: needs pgdog (" + EnvBin + ")"

// ErrNoBinary means LOAM_PGDOG_BIN is unset or names no executable file.
var ErrNoBinary = errors.New("no PgDog binary")

// Bin is the PgDog binary named by LOAM_PGDOG_BIN.
func Bin() (string, error) {
	p := os.Getenv(EnvBin)
	if p == "" {
		return "", fmt.Errorf("pgdogtest: %s is not set (build PgDog and point it at the binary): %w", EnvBin, ErrNoBinary)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("pgdogtest: %s=%s: %w: %w", EnvBin, p, err, ErrNoBinary)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("pgdogtest: %s=%s is not an executable file: %w", EnvBin, p, ErrNoBinary)
	}
	return p, nil
}

// skipper is the part of testing.TB Require uses, so that its rule can be tested.
type skipper interface {
	Helper()
	Skip(args ...any)
}

// Require returns the binary, or skips the test. It skips under LOAM_REQUIRE_REAL=1 too, on
// purpose: CI cannot build PgDog (see the package doc), and turning this skip into a
// failure would make CI fail on every run instead of testing what it can (the stand-in).
func Require(t testing.TB) string {
	t.Helper()
	return requireBin(t)
}

func requireBin(t skipper) string {
	t.Helper()
	bin, err := Bin()
	if err != nil {
		t.Skip(SkipMessage + ": " + err.Error())
		return ""
	}
	return bin
}

// Instance is one running PgDog.
type Instance struct {
	// Port is the TCP port on 127.0.0.1 of its clients and its admin database.
	Port int
	// Dir holds pgdog.toml and users.toml (configmap's layout); the instance was started
	// with --config and --users there, the paths RELOAD re-reads.
	Dir string

	bin  string
	root string
	proc *serverproc.Proc
}

// startTimeout bounds how long an instance may take to listen.
const startTimeout = 30 * time.Second

// Start writes files as generation into a new directory and starts PgDog on them; the
// instance is stopped and its directory removed when t ends. Without a binary the test is
// skipped (see Require); a start that fails fails the test with PgDog's log.
func Start(t testing.TB, generation uint64, files render.Files) *Instance {
	t.Helper()
	bin := Require(t)
	root, err := os.MkdirTemp("", "loam-pgdogtest-")
	if err != nil {
		t.Fatal(err)
	}
	i := &Instance{bin: bin, root: root, Dir: filepath.Join(root, "config")}
	t.Cleanup(func() {
		i.Stop()
		os.RemoveAll(root)
	})
	d, err := configmap.NewDir(i.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFiles(context.Background(), generation, files); err != nil {
		t.Fatal(err)
	}
	if err := i.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return i
}

// LogPath is the instance's log (its stdout and stderr).
func (i *Instance) LogPath() string { return filepath.Join(i.root, "pgdog.log") }

// LogTail is the end of the log, for a failure message.
func (i *Instance) LogTail() string { return serverproc.LogTail(i.LogPath()) }

// start runs PgDog on a free port, trying another when the one found was taken meanwhile.
func (i *Instance) start(ctx context.Context) error {
	var err error
	for range 5 {
		if err = i.startOnce(ctx); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

var errPortTaken = errors.New("port taken")

func (i *Instance) startOnce(ctx context.Context) error {
	port := i.Port
	if port == 0 {
		p, err := serverproc.FreePort()
		if err != nil {
			return fmt.Errorf("pgdogtest: %w", err)
		}
		port = p
	}
	log, err := os.OpenFile(i.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgdogtest: creating the log: %w", err)
	}
	defer log.Close() // the child keeps its own descriptor
	cmd := exec.Command(i.bin, "--config", filepath.Join(i.Dir, render.PgDogConfigFile), "--users", filepath.Join(i.Dir, render.PgDogUsersFile))
	cmd.Dir = i.root
	cmd.Env = append(os.Environ(), "PGDOG_HOST=127.0.0.1", "PGDOG_PORT="+strconv.Itoa(port), "PGDOG_WORKERS=1", "NO_COLOR=1")
	if pgBin, err := pglaunch.BinDir(); err == nil {
		// COPY_DATA and RESHARD sync the schema with pg_dump, found on PATH: the one of the
		// servers pglaunch starts.
		cmd.Env = append(cmd.Env, "PATH="+pgBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	proc, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("pgdogtest: starting %s: %w", i.bin, err)
	}
	i.Port, i.proc = port, proc
	if err := i.waitListening(ctx); err != nil {
		proc.Kill()
		tail := i.LogTail()
		if strings.Contains(tail, "Address already in use") && i.Port == port {
			i.Port = 0
			return fmt.Errorf("pgdogtest: port %d: %w", port, errPortTaken)
		}
		return fmt.Errorf("%w\n--- pgdog log (%s) ---\n%s", err, i.LogPath(), tail)
	}
	return nil
}

func (i *Instance) waitListening(ctx context.Context) error {
	deadline := time.Now().Add(startTimeout)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(i.Port))
	for time.Now().Before(deadline) {
		select {
		case <-i.proc.Exited():
			return fmt.Errorf("pgdogtest: pgdog on port %d exited while starting (%v)", i.Port, i.proc.State())
		case <-ctx.Done():
			return fmt.Errorf("pgdogtest: waiting for pgdog on port %d: %w", i.Port, ctx.Err())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pgdogtest: pgdog on port %d not listening after %v", i.Port, startTimeout)
}

// Stop ends the instance (SIGINT, PgDog's shutdown, then a kill after 5s). Stopping twice,
// or a stopped instance, is harmless.
func (i *Instance) Stop() {
	if i.proc != nil {
		i.proc.Stop(syscall.SIGINT, 5*time.Second)
		i.proc = nil
	}
}

// Kill ends the instance at once, as a crash would.
func (i *Instance) Kill() {
	if i.proc != nil {
		i.proc.Kill()
		i.proc = nil
	}
}

// Restart stops the instance and starts it again on the same port and files: it comes back
// by reading whatever the files are now, with nothing of its memory (tasks, pauses,
// a CUTOVER's swap).
func (i *Instance) Restart(t testing.TB) {
	t.Helper()
	i.Stop()
	if err := i.start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// AdminDSN is the connection string of the admin database ([admin] in users.toml; the
// user and database default to admin).
func (i *Instance) AdminDSN(password string) string { return i.DSN("admin", password, "admin") }

// DSN is a client connection string for user on database, without TLS (the instance is
// on loopback).
func (i *Instance) DSN(user, password, database string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(i.Port)),
		Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}
