package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"loam.dev/router/internal/serverproc"
)

// EnvKubeBin names the directory holding kube-apiserver and etcd.
const EnvKubeBin = "KUBE_BIN"

// EnvRequireReal, set to 1, turns every "skipped: needs kube-apiserver" into a test
// failure; CI sets it so that a missing server cannot pass as a green run.
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// Admin is the user in system:masters whose token Server.Token returns for "".
const Admin = "kubetest-admin"

// ErrNoBinaries means $KUBE_BIN is unset or lacks a program.
var ErrNoBinaries = errors.New("no kube-apiserver and etcd binaries")

// startTimeout bounds the wait for /readyz (measured ~3.5 s idle; a loaded 2-core
// machine takes several times that).
const startTimeout = 3 * time.Minute

// Server is a running etcd and kube-apiserver.
type Server struct {
	// URL is the API server's https://127.0.0.1:<port>.
	URL string
	// CA is the PEM of the API server's self-signed serving certificate chain: trust it
	// to reach URL.
	CA []byte

	dir          string
	tokens       map[string]string // user → bearer token
	etcd, apisrv *serverproc.Proc
}

// Token returns the bearer token of user, one of the users the server was started with,
// or the admin's for "" or Admin. It fails the test for a user it does not know.
func (s *Server) Token(t testing.TB, user string) string {
	t.Helper()
	if user == "" {
		user = Admin
	}
	tok, ok := s.tokens[user]
	if !ok {
		t.Fatalf("kubetest: no user %q; name it in NewShared(users...) (the token file is read once, at start)", user)
	}
	return tok
}

// TLSConfig trusts the server's certificate.
func (s *Server) TLSConfig() (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CA) {
		return nil, fmt.Errorf("kubetest: %s holds no certificate", filepath.Join(s.dir, "certs"))
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Close stops both programs and removes the directory.
func (s *Server) Close() error {
	if s.apisrv != nil {
		s.apisrv.Stop(syscall.SIGTERM, 20*time.Second)
	}
	if s.etcd != nil {
		s.etcd.Stop(syscall.SIGTERM, 20*time.Second)
	}
	return os.RemoveAll(s.dir)
}

// BinDir is $KUBE_BIN, checked to hold both programs.
func BinDir() (string, error) {
	dir := os.Getenv(EnvKubeBin)
	if dir == "" {
		return "", fmt.Errorf("kubetest: %s is not set (build kube-apiserver and etcd from the tools module conformance/kubetest/bin as .ci/run does, and point %s at their directory): %w", EnvKubeBin, EnvKubeBin, ErrNoBinaries)
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("kubetest: %s: %w: %w", p, err, ErrNoBinaries)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("kubetest: %s is not an executable file: %w", p, ErrNoBinaries)
		}
	}
	return dir, nil
}

// Shared is one server for all the tests of a package, started by the first test that
// asks for it and stopped by Close, which TestMain calls after m.Run:
//
//	var kube = kubetest.NewShared("loam-controller", "stale-controller")
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		kube.Close()
//		os.Exit(code)
//	}
//
// Tests share the server, so each works in a namespace of its own.
type Shared struct {
	users []string
	once  sync.Once
	srv   *Server
	err   error
}

// NewShared describes the server and the users (beside the admin) it gets tokens for;
// nothing starts until the first Get.
func NewShared(users ...string) *Shared { return &Shared{users: users} }

// Get returns the shared server, starting it on first use. Without binaries it skips the
// test (fails it under LOAM_REQUIRE_REAL=1); a server that does not come up fails it.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	bin, err := BinDir()
	if err != nil {
		missing(t, err)
	}
	sh.once.Do(func() { sh.srv, sh.err = Start(context.Background(), bin, sh.users...) })
	if sh.err != nil {
		t.Fatal(sh.err)
	}
	return sh.srv
}

// Close stops the shared server if it was started.
func (sh *Shared) Close() error {
	if sh.srv == nil {
		return nil
	}
	return sh.srv.Close()
}

// missing ends a test that needs a kube-apiserver it cannot have.
func missing(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("skipped: needs kube-apiserver (%s): %v", EnvKubeBin, err)
	if os.Getenv(EnvRequireReal) == "1" {
		t.Fatalf("%s; failing instead because %s=1", msg, EnvRequireReal)
	}
	t.Skip(msg)
}

// Start starts etcd and kube-apiserver from bin and waits until /readyz answers ok. A
// port taken between choosing and binding it makes a program exit early; Start then
// tries again on other ports.
func Start(ctx context.Context, bin string, users ...string) (*Server, error) {
	if slices.Contains(users, Admin) || slices.Contains(users, "") {
		return nil, fmt.Errorf("kubetest: user names must be non-empty and not %q", Admin)
	}
	var last error
	for try := 0; try < 3; try++ {
		s, err := start(ctx, bin, users)
		if err == nil {
			return s, nil
		}
		last = err
		if !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return nil, last
}

var errExitedEarly = errors.New("exited before it was ready")

func start(ctx context.Context, bin string, users []string) (_ *Server, err error) {
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	s := &Server{dir: dir, tokens: map[string]string{}}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	var tokens strings.Builder
	for i, u := range append([]string{Admin}, users...) {
		b := make([]byte, 24)
		rand.Read(b)
		s.tokens[u] = hex.EncodeToString(b)
		groups := ""
		if u == Admin {
			groups = ",system:masters"
		}
		fmt.Fprintf(&tokens, "%s,%s,%d%s\n", s.tokens[u], u, 1000+i, groups)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens.String()), 0o600); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	if err := writeEtcdCerts(dir); err != nil {
		return nil, fmt.Errorf("kubetest: etcd certificates: %w", err)
	}
	if err := writeServiceAccountKeys(dir); err != nil {
		return nil, fmt.Errorf("kubetest: service-account keys: %w", err)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = serverproc.FreePort(); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
	}
	client := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	ca, crt, key := filepath.Join(dir, "etcd-ca.crt"), filepath.Join(dir, "etcd.crt"), filepath.Join(dir, "etcd.key")
	etcdLog := filepath.Join(dir, "etcd.log")
	s.etcd, err = run(filepath.Join(bin, "etcd"), etcdLog,
		"--name=kubetest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kubetest="+peer,
		"--client-cert-auth", "--trusted-ca-file="+ca, "--cert-file="+crt, "--key-file="+key,
		"--peer-client-cert-auth", "--peer-trusted-ca-file="+ca, "--peer-cert-file="+crt, "--peer-key-file="+key,
		"--listen-metrics-urls=", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	apiLog := filepath.Join(dir, "kube-apiserver.log")
	certs := filepath.Join(dir, "certs")
	s.apisrv, err = run(filepath.Join(bin, "kube-apiserver"), apiLog,
		"--etcd-servers="+client, "--etcd-cafile="+ca, "--etcd-certfile="+crt, "--etcd-keyfile="+key,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+certs,
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/24",
		// Nothing creates the namespaces' default service accounts (no controller
		// manager), so the admission plugin that requires one would refuse every pod.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		"--v=0")
	if err != nil {
		return nil, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	if err := s.waitReady(ctx, certs, etcdLog, apiLog); err != nil {
		return nil, err
	}
	return s, nil
}

func run(path, logPath string, args ...string) (*serverproc.Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := serverproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("kubetest: starting %s: %w", path, err)
	}
	return p, nil
}

// waitReady polls /readyz as the admin until it answers ok, either program exits, or
// startTimeout passes.
func (s *Server) waitReady(ctx context.Context, certs, etcdLog, apiLog string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		select {
		case <-s.etcd.Exited():
			return fmt.Errorf("kubetest: etcd %w (%s); its log:\n%s", errExitedEarly, s.etcd.State(), serverproc.LogTail(etcdLog))
		case <-s.apisrv.Exited():
			return fmt.Errorf("kubetest: kube-apiserver %w (%s); its log:\n%s", errExitedEarly, s.apisrv.State(), serverproc.LogTail(apiLog))
		case <-ctx.Done():
			return fmt.Errorf("kubetest: kube-apiserver not ready after %s (last: %v); its log:\n%s", startTimeout, last, serverproc.LogTail(apiLog))
		case <-time.After(200 * time.Millisecond):
		}
		if s.CA == nil {
			// The certificate appears in --cert-dir once the server generated it.
			b, err := os.ReadFile(filepath.Join(certs, "apiserver.crt"))
			if err != nil {
				last = err
				continue
			}
			s.CA = b
		}
		if last = s.readyz(ctx); last == nil {
			return nil
		}
	}
}

func (s *Server) readyz(ctx context.Context) error {
	tc, err := s.TLSConfig()
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[Admin])
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}
