package kubernetes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/conformance/kubetest"
	"loam.dev/router/conformance/refrouter"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// controllerBinary builds cmd/loamrouter-kubernetes once per test run (TestMain removes
// it).
func controllerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loamrouter-kubernetes-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "loamrouter-kubernetes")
		out, err := exec.Command("go", "build", "-mod=mod", "-o", builtBin, "./cmd/loamrouter-kubernetes").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtBin
}

// daemonProc is one running loamrouter-kubernetes, its JSON log lines collected.
type daemonProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	logs []map[string]any
	raw  []string
}

func startDaemon(t *testing.T, bin string, env []string, args ...string) *daemonProc {
	t.Helper()
	p := &daemonProc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			_ = json.Unmarshal(sc.Bytes(), &m)
			p.mu.Lock()
			p.raw = append(p.raw, sc.Text())
			if m != nil {
				p.logs = append(p.logs, m)
			}
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *daemonProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// outcome waits for the log line of generation gen's push outcome and returns it.
func (p *daemonProc) outcome(gen uint64, within time.Duration) string {
	p.t.Helper()
	prefix := fmt.Sprintf("Outcome gen=%d ", gen)
	deadline := time.Now().Add(within)
	for {
		p.mu.Lock()
		for _, l := range p.logs {
			if o, _ := l["outcome"].(string); l["msg"] == "config push ended" && strings.HasPrefix(o+" ", prefix) {
				p.mu.Unlock()
				return o
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			p.t.Fatalf("the daemon exited before the outcome of generation %d:\n%s", gen, p.log())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no outcome of generation %d after %v:\n%s", gen, within, p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count is how many log lines carry msg.
func (p *daemonProc) count(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.logs {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}

func (p *daemonProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.raw, "\n")
}

// kubeconfig writes a kubeconfig acting as user on srv, mode 0600.
func kubeconfig(t *testing.T, srv *kubetest.Server, user, path string) {
	t.Helper()
	ca := filepath.Join(filepath.Dir(path), user+"-ca.pem")
	require.NoError(t, os.WriteFile(ca, srv.CA, 0o600))
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: %s}
current-context: test
`, srv.URL, ca, user, srv.Token(t, user), user)
	require.NoError(t, os.WriteFile(path, []byte(kc), 0o600))
}

// seedStore writes rec into the embedded store in dir, before a daemon holds it.
func seedStore(t *testing.T, dir string, rec *shardmap.Record) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "loam.db"), nil)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.CAS(context.Background(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, rec)
	require.NoError(t, err)
}

// daemonConfig is loam.toml of a controller on the Kubernetes target: the embedded store
// in dir/<id>, the API on a Unix socket, the three pods' routers (their admin addresses
// and the directories their kubelet projects into).
func daemonConfig(t *testing.T, dir, id, ns string, admins, podDirs []string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[controller]\nid = %q\nlisten = %q\n\n[store]\ndir = %q\n\n", id, "unix:"+filepath.Join(dir, id+"-run", "ctl.sock"), filepath.Join(dir, id+"-store"))
	fmt.Fprintf(&b, "[[databases]]\nname = \"app\"\ninsecure = true\napp_user = \"app\"\napp_password_env = \"APP_PASSWORD\"\nadmin_password_env = \"PGDOG_ADMIN_PASSWORD\"\n\n")
	fmt.Fprintf(&b, "[databases.indoubt]\nenabled = false\n\n")
	fmt.Fprintf(&b, "[databases.target]\nkind = \"kubernetes\"\nnamespace = %q\nconfigmap = \"pgdog\"\nsecret = \"pgdog-users\"\n\n", ns)
	for i := range admins {
		fmt.Fprintf(&b, "[[databases.routers]]\nid = \"pgdog-%d\"\nadmin = %q\nconfig_dir = %q\n\n", i, admins[i], podDirs[i])
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, id+"-run"), 0o700))
	path := filepath.Join(dir, id+".toml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// routingChange is rec at generation gen with a routing change (shard 1 moves port).
func routingChange(rec shardmap.Record, gen uint64) *shardmap.Record {
	rec.Generation = gen
	rec.Shards = slices.Clone(rec.Shards)
	rec.Shards[1].Backend.Port = uint16(6000 + gen)
	return &rec
}

// TestRealControllerBinary: the loamrouter-kubernetes daemon, built from
// cmd/loamrouter-kubernetes, against the real kube-apiserver, as the controller's user
// bound to the least Role. Its ConfigPush writes the ConfigMap (pgdog.toml, the
// generation annotation) and the Secret (users.toml, never in the ConfigMap); a kubelet
// stand-in projects them into three pods' directories 0.5–1 s later; each pod's
// reference router (the PgDog admin protocol on TCP) is reloaded only once its directory
// shows the generation, and the push is confirmed on all three, five times. A second,
// stale controller (its own store, an older record, its own user bound to the same Role)
// is refused: the ConfigMap never goes back. It logs the figure: from the record's CAS to
// the daemon's confirmed Outcome, median over the pushes.
func TestRealControllerBinary(t *testing.T) {
	srv := kube.Get(t)
	bin := controllerBinary(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	ctx := context.Background()
	// deploy/kubernetes/config.yaml's objects, empty: the controller only gets and updates.
	_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pgdog"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pgdog-users"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, admin, kubernetes.Role(ns, "loam-router", "pgdog", "pgdog-users"), controller)
	bind(t, admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loam-router-stale"}, Rules: kubernetes.Role(ns, "", "pgdog", "pgdog-users").Rules}, stale)

	dir := t.TempDir()
	var podDirs, admins []string
	var lns []net.Listener
	for i := range 3 {
		podDirs = append(podDirs, filepath.Join(dir, fmt.Sprintf("pod-%d", i)))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lns = append(lns, ln)
		admins = append(admins, ln.Addr().String())
	}
	const delay = time.Second
	rng := rand.New(rand.NewPCG(3, 4))
	var rngMu sync.Mutex
	startKubelet(t, admin, ns, "pgdog", "pgdog-users", podDirs, func(int) time.Duration {
		rngMu.Lock()
		defer rngMu.Unlock()
		return delay/2 + time.Duration(rng.Int64N(int64(delay/2)))
	})

	rec := record(1)
	env := []string{"APP_PASSWORD=app-secret", "PGDOG_ADMIN_PASSWORD=admin-secret"}
	conf := daemonConfig(t, dir, "ctl-a", ns, admins, podDirs)
	seedStore(t, filepath.Join(dir, "ctl-a-store"), rec)
	kubeconfig(t, srv, controller, filepath.Join(dir, "ctl-a.kubeconfig"))
	d := startDaemon(t, bin, env, "--config", conf, "--kubeconfig", filepath.Join(dir, "ctl-a.kubeconfig"), "--log-format", "json")

	// The first push fills the ConfigMap; the pods start once their kubelet projected it.
	var routers []*refrouter.Router
	for i, pd := range podDirs {
		waitVisible(t, pd, 1)
		r, err := refrouter.Open(refrouter.Options{ID: fmt.Sprintf("pgdog-%d", i), Dir: pd, Database: "app", User: "app"})
		require.NoError(t, err)
		t.Cleanup(r.Close)
		s, err := refrouter.Serve(lns[i], refrouter.ServerOptions{Router: r, Logger: quietLogger()})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		routers = append(routers, r)
	}
	confirmed := "confirmed=(pgdog-0,pgdog-1,pgdog-2)"
	require.Contains(t, d.outcome(1, 2*time.Minute), confirmed)

	st, err := httpstore.Dial("unix:"+filepath.Join(dir, "ctl-a-run", "ctl.sock"), nil)
	require.NoError(t, err)
	defer st.Close()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	failed := d.count("reload failed") // the first push may reload a pod before it serves
	var took []time.Duration
	const last = 6
	for gen := uint64(2); gen <= last; gen++ {
		cur, err := st.Read(ctx, ref)
		require.NoError(t, err)
		start := time.Now()
		_, err = st.CAS(ctx, ref, cur.Version, routingChange(*cur, gen))
		require.NoError(t, err)
		o := d.outcome(gen, 2*time.Minute)
		took = append(took, time.Since(start))
		require.Contains(t, o, confirmed, "generation %d", gen)
		require.NotContains(t, o, "stuck")
		for _, r := range routers {
			g, ok := r.Generation()
			require.True(t, ok)
			require.Equal(t, gen, g, "%s routes by the pushed generation", r.ID())
		}
		cm, s := objects(t, admin, ns)
		require.Equal(t, fmt.Sprint(gen), cm.Annotations[render.AnnotationGeneration])
		require.Equal(t, fmt.Sprint(gen), s.Annotations[render.AnnotationGeneration])
		require.Contains(t, cm.Data, "pgdog.toml")
		require.NotContains(t, cm.Data, "users.toml", "credentials never go into the ConfigMap")
		require.Contains(t, string(s.Data["users.toml"]), "app-secret")
	}
	// Every RELOAD waited for the pod's files (config_dir): none re-read old ones and
	// failed (the pgdog adapter's ErrNotLoaded), though the kubelet is 0.5–1 s late.
	require.Equal(t, failed, d.count("reload failed"), "a RELOAD was sent before its pod saw the files:\n%s", d.log())
	before, _ := objects(t, admin, ns)

	// A stale controller: its own store holding generation 3, its own user (bound to the
	// same Role). Its push reads the ConfigMap at generation 6 and is refused: nothing
	// moves back, the ConfigMap is not written at all.
	staleRec := routingChange(*rec, 3)
	staleConf := daemonConfig(t, dir, "ctl-stale", ns, admins, podDirs)
	seedStore(t, filepath.Join(dir, "ctl-stale-store"), staleRec)
	kubeconfig(t, srv, stale, filepath.Join(dir, "ctl-stale.kubeconfig"))
	old := startDaemon(t, bin, env, "--config", staleConf, "--kubeconfig", filepath.Join(dir, "ctl-stale.kubeconfig"), "--log-format", "json")
	o := old.outcome(3, 2*time.Minute)
	require.Contains(t, o, "files_err=", "the stale push's write is refused: %s", o)
	require.Contains(t, o, "holds generation 6", o)
	require.NotContains(t, o, "confirmed=", "no pod is reloaded by the stale controller")
	after, s := objects(t, admin, ns)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "the stale controller did not write the ConfigMap")
	require.Equal(t, fmt.Sprint(last), after.Annotations[render.AnnotationGeneration])
	require.Equal(t, fmt.Sprint(last), s.Annotations[render.AnnotationGeneration])
	for _, r := range routers {
		g, _ := r.Generation()
		require.Equal(t, uint64(last), g, r.ID())
	}

	// SIGTERM drains: the daemon releases the lease and exits 0.
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.done:
		require.Equal(t, 0, d.cmd.ProcessState.ExitCode(), d.log())
	case <-time.After(time.Minute):
		t.Fatalf("not drained a minute after SIGTERM:\n%s", d.log())
	}

	slices.Sort(took)
	t.Logf("loamrouter-kubernetes: generation confirmed on 3 pods: median %v over %d pushes (min %v, max %v), kubelet stand-in delay 0.5–1 s per pod",
		took[len(took)/2].Round(time.Millisecond), len(took), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}
