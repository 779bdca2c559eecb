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
	k8s "k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/conformance/etcdtest"
	"loam.dev/router/conformance/kubetest"
	ctl "loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
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
		out, err := exec.Command("go", "build", "-o", builtBin, "./cmd/loamrouter-kubernetes").CombinedOutput()
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

// find returns the logged outcome of generation gen's push, if there is one yet.
func (p *daemonProc) find(gen uint64) (string, bool) {
	prefix := fmt.Sprintf("Outcome gen=%d ", gen)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.logs {
		if o, _ := l["outcome"].(string); l["msg"] == "config push ended" && strings.HasPrefix(o+" ", prefix) {
			return o, true
		}
	}
	return "", false
}

// outcome waits for the log line of generation gen's push outcome and returns it.
func (p *daemonProc) outcome(gen uint64, within time.Duration) string {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if o, ok := p.find(gen); ok {
			return o
		}
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

// rig is what a controller binary runs against: a namespace of its own on the real API
// server with deploy/kubernetes/config.yaml's objects (empty: the controller only gets and
// updates), the controller's and a stale controller's users bound to the least Role, a
// kubelet stand-in projecting both objects into three pods' directories 0.5–1 s after
// every change, and the pods' admin listeners (served once startPods runs).
type rig struct {
	srv     *kubetest.Server
	admin   k8s.Interface
	ns, dir string
	podDirs []string
	admins  []string
	lns     []net.Listener
	routers []*refrouter.Router
}

// daemonEnv are the passwords the daemons' loam.toml names.
var daemonEnv = []string{"APP_PASSWORD=app-secret", "PGDOG_ADMIN_PASSWORD=admin-secret"}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{srv: kube.Get(t), dir: t.TempDir()}
	r.admin = client(t, r.srv, "")
	r.ns = namespace(t, r.admin)
	ctx := context.Background()
	_, err := r.admin.CoreV1().ConfigMaps(r.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pgdog"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = r.admin.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pgdog-users"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, r.admin, kubernetes.Role(r.ns, "loam-router", "pgdog", "pgdog-users"), controller)
	bind(t, r.admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "loam-router-stale"}, Rules: kubernetes.Role(r.ns, "", "pgdog", "pgdog-users").Rules}, stale)
	for i := range 3 {
		r.podDirs = append(r.podDirs, filepath.Join(r.dir, fmt.Sprintf("pod-%d", i)))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		r.lns = append(r.lns, ln)
		r.admins = append(r.admins, ln.Addr().String())
	}
	const delay = time.Second
	rng := rand.New(rand.NewPCG(3, 4))
	var mu sync.Mutex
	startKubelet(t, r.admin, r.ns, "pgdog", "pgdog-users", r.podDirs, func(int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return delay/2 + time.Duration(rng.Int64N(int64(delay/2)))
	})
	return r
}

// startPods starts each pod's reference router once its kubelet projected generation 1
// (the controller's first push), serving the PgDog admin protocol on its listener.
func (r *rig) startPods(t *testing.T) {
	t.Helper()
	for i, pd := range r.podDirs {
		waitVisible(t, pd, 1)
		rt, err := refrouter.Open(refrouter.Options{ID: fmt.Sprintf("pgdog-%d", i), Dir: pd, Database: "app", User: "app"})
		require.NoError(t, err)
		t.Cleanup(rt.Close)
		s, err := refrouter.Serve(r.lns[i], refrouter.ServerOptions{Router: rt, Logger: quietLogger()})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		r.routers = append(r.routers, rt)
	}
}

// config writes loam.toml of controller id on the Kubernetes target: store is its [store]
// table, the API is on a Unix socket (socket), and the routers are the three pods (their
// admin addresses, and the directories their kubelet projects into as config_dir).
func (r *rig) config(t *testing.T, id, store, leaseTTL string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[controller]\nid = %q\nlisten = %q\nlease_ttl = %q\n\n%s\n", id, "unix:"+r.socket(id), leaseTTL, store)
	fmt.Fprintf(&b, "[[databases]]\nname = \"app\"\ninsecure = true\napp_user = \"app\"\napp_password_env = \"APP_PASSWORD\"\nadmin_password_env = \"PGDOG_ADMIN_PASSWORD\"\n\n")
	fmt.Fprintf(&b, "[databases.indoubt]\nenabled = false\n\n")
	fmt.Fprintf(&b, "[databases.target]\nkind = \"kubernetes\"\nnamespace = %q\nconfigmap = \"pgdog\"\nsecret = \"pgdog-users\"\n\n", r.ns)
	for i := range r.admins {
		fmt.Fprintf(&b, "[[databases.routers]]\nid = \"pgdog-%d\"\nadmin = %q\nconfig_dir = %q\n\n", i, r.admins[i], r.podDirs[i])
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(r.socket(id)), 0o700))
	path := filepath.Join(r.dir, id+".toml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

func (r *rig) socket(id string) string { return filepath.Join(r.dir, id+"-run", "ctl.sock") }

// boltStore is the [store] of an embedded store of controller id's own.
func (r *rig) boltStore(id string) (dir, table string) {
	dir = filepath.Join(r.dir, id+"-store")
	return dir, fmt.Sprintf("[store]\ndir = %q\n", dir)
}

// start runs controller id on conf, acting as user on the API server.
func (r *rig) start(t *testing.T, id, user, conf string) *daemonProc {
	t.Helper()
	kc := filepath.Join(r.dir, id+".kubeconfig")
	kubeconfig(t, r.srv, user, kc)
	return startDaemon(t, controllerBinary(t), daemonEnv, "--config", conf, "--kubeconfig", kc, "--log-format", "json")
}

// pushed checks the objects and the pods after generation gen's push was confirmed: the
// ConfigMap holds pgdog.toml and the annotation, the Secret users.toml, and every pod's
// router routes by gen.
func (r *rig) pushed(t *testing.T, gen uint64) {
	t.Helper()
	for _, rt := range r.routers {
		g, ok := rt.Generation()
		require.True(t, ok)
		require.Equal(t, gen, g, "%s routes by the pushed generation", rt.ID())
	}
	cm, s := objects(t, r.admin, r.ns)
	require.Equal(t, fmt.Sprint(gen), cm.Annotations[render.AnnotationGeneration])
	require.Equal(t, fmt.Sprint(gen), s.Annotations[render.AnnotationGeneration])
	require.Contains(t, cm.Data, "pgdog.toml")
	require.NotContains(t, cm.Data, "users.toml", "credentials never go into the ConfigMap")
	require.Contains(t, string(s.Data["users.toml"]), "app-secret")
}

// routingChange is rec at generation gen with a routing change (shard 1 moves port).
func routingChange(rec shardmap.Record, gen uint64) *shardmap.Record {
	rec.Generation = gen
	rec.Shards = slices.Clone(rec.Shards)
	rec.Shards[1].Backend.Port = uint16(6000 + gen)
	return &rec
}

// confirmed is the Outcome's list when every pod is.
const confirmed = "confirmed=(pgdog-0,pgdog-1,pgdog-2)"

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
	r := newRig(t)
	ctx := context.Background()
	rec := record(1)
	storeDir, storeTable := r.boltStore("ctl-a")
	seedStore(t, storeDir, rec)
	d := r.start(t, "ctl-a", controller, r.config(t, "ctl-a", storeTable, "10s"))
	r.startPods(t)
	require.Contains(t, d.outcome(1, 2*time.Minute), confirmed)

	st, err := httpstore.Dial("unix:"+r.socket("ctl-a"), nil)
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
		r.pushed(t, gen)
	}
	// Every RELOAD waited for the pod's files (config_dir): none re-read old ones and
	// failed (the pgdog adapter's ErrNotLoaded), though the kubelet is 0.5–1 s late.
	require.Equal(t, failed, d.count("reload failed"), "a RELOAD was sent before its pod saw the files:\n%s", d.log())
	before, _ := objects(t, r.admin, r.ns)

	// A stale controller: its own store holding generation 3, its own user (bound to the
	// same Role). Its push reads the ConfigMap at generation 6 and is refused: nothing
	// moves back, the ConfigMap is not written at all.
	staleDir, staleTable := r.boltStore("ctl-stale")
	seedStore(t, staleDir, routingChange(*rec, 3))
	old := r.start(t, "ctl-stale", stale, r.config(t, "ctl-stale", staleTable, "10s"))
	o := old.outcome(3, 2*time.Minute)
	require.Contains(t, o, "files_err=", "the stale push's write is refused: %s", o)
	require.Contains(t, o, "holds generation 6", o)
	require.NotContains(t, o, "confirmed=", "no pod is reloaded by the stale controller")
	after, _ := objects(t, r.admin, r.ns)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "the stale controller did not write the ConfigMap")
	r.pushed(t, last)

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

// TestRealControllerStandby: two replicas of loamrouter-kubernetes, as the Deployment
// runs them: one etcd store (the lease is etcd's), the same service account user. One
// takes the lease and pushes generation 1 to the three pods; SIGKILL it, publish
// generation 2, and the standby takes the lease over and pushes it, confirmed on every pod
// and written to the ConfigMap. It logs the figure: from the SIGKILL to the confirmed
// Outcome of generation 2 (lease_ttl 3s).
func TestRealControllerStandby(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	etcd := etcdtest.Start(t, 1)
	ecfg := &ctl.EtcdStoreConfig{Endpoints: []string{etcd.Members[0].ClientURL}}
	st, err := ctl.OpenEtcd(ecfg)
	require.NoError(t, err)
	defer st.Close()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	_, err = st.CAS(ctx, ref, 0, record(1))
	require.NoError(t, err)
	table := fmt.Sprintf("[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [%q]\n", ecfg.Endpoints[0])
	a := r.start(t, "ctl-a", controller, r.config(t, "ctl-a", table, "3s"))
	b := r.start(t, "ctl-b", controller, r.config(t, "ctl-b", table, "3s"))
	r.startPods(t)

	// Whichever took the lease pushes generation 1; the other stands by.
	active, standby := a, b
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, ok := a.find(1); ok {
			break
		}
		if _, ok := b.find(1); ok {
			active, standby = b, a
			break
		}
		require.True(t, time.Now().Before(deadline), "no controller pushed generation 1:\nctl-a:\n%s\nctl-b:\n%s", a.log(), b.log())
		time.Sleep(10 * time.Millisecond)
	}
	require.Contains(t, active.outcome(1, time.Minute), confirmed)
	_, pushed := standby.find(1)
	require.False(t, pushed, "the standby pushed while the other held the lease")

	active.kill()
	killed := time.Now()
	cur, err := st.Read(ctx, ref)
	require.NoError(t, err)
	_, err = st.CAS(ctx, ref, cur.Version, routingChange(*cur, 2))
	require.NoError(t, err)
	o := standby.outcome(2, 2*time.Minute)
	took := time.Since(killed)
	require.Contains(t, o, confirmed)
	r.pushed(t, 2)
	t.Logf("loamrouter-kubernetes standby: generation 2 confirmed on 3 pods %v after the active replica's SIGKILL (lease_ttl 3s, kubelet stand-in 0.5–1 s)", took.Round(time.Millisecond))
}
