package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"loam.dev/router/internal/serverproc"
)

// EnvBinary names the etcd binary to run instead of etcd on PATH.
const EnvBinary = "LOAM_ETCD"

// EnvRequireReal, set to 1, turns "skipped: needs etcd" into a failure.
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// Binary returns the etcd binary tests run: $LOAM_ETCD or etcd on PATH.
func Binary() (string, error) {
	name := os.Getenv(EnvBinary)
	if name == "" {
		name = "etcd"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("etcdtest: %w (install Debian's etcd-server or set %s)", err, EnvBinary)
	}
	return p, nil
}

// skipper is the part of testing.TB that Require uses, so the skip/fail rule is testable.
type skipper interface {
	Helper()
	Skip(args ...any)
	Fatal(args ...any)
}

// Require returns the etcd binary or ends the test: a skip, or a failure under
// LOAM_REQUIRE_REAL=1.
func Require(t testing.TB) string { t.Helper(); return requireBinary(t, Binary) }

func requireBinary(t skipper, find func() (string, error)) string {
	t.Helper()
	bin, err := find()
	if err != nil {
		msg := fmt.Sprintf("skipped: needs etcd (%v)", err)
		if os.Getenv(EnvRequireReal) == "1" {
			t.Fatal(EnvRequireReal + "=1: " + msg)
			return ""
		}
		t.Skip(msg)
		return ""
	}
	return bin
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:port
	PeerURL   string
	Dir       string // data directory
	logPath   string
	bin       string
	initial   string // --initial-cluster
	token     string
	proc      *serverproc.Proc
	down      bool // stopped or killed by the test: not expected to run
}

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	Members []*Member
}

// Start starts an n-member cluster and waits until it has a leader and answers a read
// through every member. The members are stopped at the test's cleanup.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Require(t)
	if n < 1 {
		t.Fatalf("etcdtest: a cluster needs at least one member (asked for %d)", n)
	}
	var last error
	for attempt := range 3 {
		c, err := start(bin, t.TempDir(), n)
		if err == nil {
			t.Cleanup(c.stopAll)
			return c
		}
		last = fmt.Errorf("attempt %d: %w", attempt+1, err)
	}
	t.Fatalf("etcdtest: cannot start a %d-member cluster: %v", n, last)
	return nil
}

func start(bin, dir string, n int) (*Cluster, error) {
	c := &Cluster{}
	var peers []string
	token := fmt.Sprintf("loam-%d-%d", os.Getpid(), time.Now().UnixNano())
	for i := range n {
		cp, err := serverproc.FreePort()
		if err != nil {
			return nil, err
		}
		pp, err := serverproc.FreePort()
		if err != nil {
			return nil, err
		}
		name := "m" + strconv.Itoa(i)
		m := &Member{Name: name, bin: bin, token: token,
			ClientURL: "http://127.0.0.1:" + strconv.Itoa(cp), PeerURL: "http://127.0.0.1:" + strconv.Itoa(pp),
			Dir: filepath.Join(dir, name), logPath: filepath.Join(dir, name+".log")}
		c.Members = append(c.Members, m)
		peers = append(peers, name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.initial = strings.Join(peers, ",")
		if err := m.launch(true); err != nil {
			c.stopAll()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.stopAll()
		return nil, err
	}
	return c, nil
}

// launch starts the member's process, on a new cluster's flags the first time and on its
// data directory afterwards.
func (m *Member) launch(fresh bool) error {
	args := []string{
		"--name", m.Name, "--data-dir", m.Dir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", m.initial, "--initial-cluster-token", m.token,
		"--logger", "zap", "--log-outputs", "stderr",
	}
	if fresh {
		args = append(args, "--initial-cluster-state", "new")
	} else {
		args = append(args, "--initial-cluster-state", "existing")
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("etcdtest: %s log: %w", m.Name, err)
	}
	cmd := exec.Command(m.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: an interrupted test binary leaves no member behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p, err := serverproc.Start(cmd)
	logf.Close()
	if err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", m.Name, err)
	}
	m.proc, m.down = p, false
	return nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// Client returns a client of every member, closed at the test's cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return ClientOf(t, c.Members...)
}

// ClientOf returns a client of the given members only, closed at the test's cleanup. A
// paused member keeps its connections open and answers nothing, so a request the client
// sends it waits for its deadline: a test that pauses a member talks to the others.
func ClientOf(t testing.TB, members ...*Member) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range members {
		eps = append(eps, m.ClientURL)
	}
	cl, err := newClient(eps)
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func newClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// running reports whether the member's process is alive (paused counts as alive).
func (m *Member) running() bool {
	if m.proc == nil {
		return false
	}
	select {
	case <-m.proc.Exited():
		return false
	default:
		return true
	}
}

// WaitHealthy waits until every running member answers a status request and all agree on
// one leader, and a linearizable read succeeds.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return c.poll(ctx, "cluster not healthy", func(cl *clientv3.Client) error {
		for _, m := range c.Members {
			if m.proc != nil && !m.down && !m.running() {
				return permanent{fmt.Errorf("etcdtest: %s exited (%v); log tail:\n%s", m.Name, m.proc.State(), serverproc.LogTail(m.logPath))}
			}
		}
		var leader uint64
		for m, st := range c.statuses(ctx, cl) {
			if st.err != nil {
				return fmt.Errorf("%s: %w", m.Name, st.err)
			}
			if st.leader == 0 || (leader != 0 && st.leader != leader) {
				return fmt.Errorf("%s: no agreed leader (sees %x, others %x)", m.Name, st.leader, leader)
			}
			leader = st.leader
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cl.Get(rctx, "etcdtest/health")
		return err
	})
}

// Leader returns the running member that says it is the raft leader.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var found *Member
	err := c.poll(ctx, "no leader found", func(cl *clientv3.Client) error {
		var last error
		for m, st := range c.statuses(ctx, cl) {
			if st.err != nil {
				last = st.err
			} else if st.leader != 0 && st.self == st.leader {
				found = m
				return nil
			}
		}
		return fmt.Errorf("no member says it leads (last error: %v)", last)
	})
	return found, err
}

// memberStatus is what one member said of itself.
type memberStatus struct {
	self, leader uint64
	err          error
}

// statuses asks every running member for its status, one second each.
func (c *Cluster) statuses(ctx context.Context, cl *clientv3.Client) iter.Seq2[*Member, memberStatus] {
	return func(yield func(*Member, memberStatus) bool) {
		for _, m := range c.Members {
			if !m.running() {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cl.Status(sctx, m.ClientURL)
			cancel()
			ms := memberStatus{err: err}
			if err == nil {
				ms.self, ms.leader = st.Header.MemberId, st.Leader
			}
			if !yield(m, ms) {
				return
			}
		}
	}
}

// poll calls try with a client of every member every 20ms until it returns nil, returns a
// permanent error, or ctx ends (what names the wait in that error).
func (c *Cluster) poll(ctx context.Context, what string, try func(*clientv3.Client) error) error {
	cl, err := newClient(c.Endpoints())
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		err := try(cl)
		var p permanent
		switch {
		case err == nil:
			return nil
		case errors.As(err, &p):
			return p.err
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("etcdtest: %s: %v (%w)", what, err, ctx.Err())
		case <-t.C:
		}
	}
}

// permanent marks an error poll must not wait out.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

// ErrNotRunning is returned when a member that is not running is asked to pause or resume.
var ErrNotRunning = errors.New("etcdtest: member is not running")

// Kill ends the member with SIGKILL and waits for it: no shutdown, no last write.
func (m *Member) Kill() {
	m.down = true
	if m.running() {
		m.proc.Kill()
	}
}

// Stop ends the member gracefully (SIGTERM, then SIGKILL after 10s).
func (m *Member) Stop() {
	m.down = true
	if m.running() {
		m.proc.Stop(syscall.SIGTERM, 10*time.Second)
	}
}

// Pause stops the member's process with SIGSTOP: it keeps its sockets but answers nothing.
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *Member) signal(sig syscall.Signal) error {
	if !m.running() {
		return fmt.Errorf("%w: %s", ErrNotRunning, m.Name)
	}
	return syscall.Kill(-m.proc.Pid(), sig)
}

// Restart starts a stopped or killed member again on its data directory.
func (m *Member) Restart() error {
	if m.running() {
		return fmt.Errorf("etcdtest: %s is still running (stop or kill it first)", m.Name)
	}
	return m.launch(false)
}

// Log is the end of the member's log, for failure messages.
func (m *Member) Log() string { return serverproc.LogTail(m.logPath) }

func (c *Cluster) stopAll() {
	for _, m := range c.Members {
		if m.running() {
			_ = syscall.Kill(-m.proc.Pid(), syscall.SIGCONT) // a paused member cannot handle SIGTERM
			m.Stop()
		}
	}
}
