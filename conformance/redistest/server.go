package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// Binary returns the server binary tests use: $LOAM_REDIS_SERVER or redis-server on PATH.
func Binary() (string, error) {
	name := os.Getenv("LOAM_REDIS_SERVER")
	if name == "" {
		name = "redis-server"
	}
	return exec.LookPath(name)
}

// Require returns the server binary, or skips the test ("skipped: needs redis-server") when
// there is none — and fails it instead when LOAM_REQUIRE_REAL=1.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	return require(t, bin, err)
}

// skipper is the part of testing.TB that require uses, so the skip/fail rule can be tested.
type skipper interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
}

func require(t skipper, bin string, err error) string {
	t.Helper()
	if err != nil {
		msg := fmt.Sprintf("skipped: needs redis-server (%v; install Debian's redis-server or set LOAM_REDIS_SERVER)", err)
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatal("LOAM_REQUIRE_REAL=1: " + msg)
			return ""
		}
		t.Skip(msg)
		return ""
	}
	return bin
}

// Server is one running node.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int
	Dir  string
	ID   string // cluster node id ("" when cluster mode is disabled)
	cmd  *exec.Cmd
	done chan struct{}
	// Client talks to this node only (no redirects followed), for admin commands.
	Client valkeygo.Client
}

// ErrStart is wrapped when a node cannot be started.
var ErrStart = errors.New("redistest: cannot start node")

// freePort finds a port that is free on 127.0.0.1 and, for a cluster node, whose bus port
// (port+10000) is free too. Another process may still take it before the server binds; Start
// retries on that.
func freePort(cluster bool) (int, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !cluster {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("%w: no free port pair found", ErrStart)
}

func start(t testing.TB, bin, dir string, cluster bool) (*Server, error) {
	var lastErr error
	for attempt := range 5 {
		port, err := freePort(cluster)
		if err != nil {
			return nil, err
		}
		nd := filepath.Join(dir, strconv.Itoa(port))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		conf := strings.Join([]string{
			"bind 127.0.0.1", "port " + strconv.Itoa(port), "daemonize no", "save \"\"",
			"appendonly no", "dir " + nd, "logfile " + filepath.Join(nd, "redis.log"),
			"cluster-enabled " + map[bool]string{true: "yes", false: "no"}[cluster],
			"cluster-config-file nodes.conf", "cluster-node-timeout 5000",
			"protected-mode no",
		}, "\n") + "\n"
		cf := filepath.Join(nd, "redis.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		cmd := exec.Command(bin, cf)
		cmd.Dir = nd
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrStart, bin, err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: nd, cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(s.done) }()
		t.Cleanup(s.stop)
		if err := s.waitReady(); err != nil {
			lastErr = fmt.Errorf("attempt %d on port %d: %w", attempt+1, port, err)
			s.stop()
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func (s *Server) waitReady() error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("%w: server exited; log tail:\n%s", ErrStart, s.log())
		default:
		}
		c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{s.Addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true})
		if err == nil {
			if err = c.Do(context.Background(), c.B().Ping().Build()).Error(); err == nil {
				s.Client = c
				return nil
			}
			c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%w: %s not answering PING after 15s; log tail:\n%s", ErrStart, s.Addr, s.log())
}

// stop ends the process this package started (SIGTERM, SIGKILL after 5 s) and only that one.
func (s *Server) stop() {
	if s.Client != nil {
		s.Client.Close()
		s.Client = nil
	}
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Do runs one admin command on this node and returns the reply.
func (s *Server) Do(ctx context.Context, args ...string) valkeygo.ValkeyResult {
	return s.Client.Do(ctx, s.Client.B().Arbitrary(args...).Build())
}

// StartStandalone starts one node with cluster mode disabled.
func StartStandalone(t testing.TB) *Server {
	t.Helper()
	bin := Require(t)
	s, err := start(t, bin, t.TempDir(), false)
	if err != nil {
		t.Fatalf("redistest: standalone node: %v", err)
	}
	return s
}
