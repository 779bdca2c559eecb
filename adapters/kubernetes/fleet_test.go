package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"loam.dev/router/adapters/kubernetes"
	ctl "loam.dev/router/controller"
	"loam.dev/router/kernel/render"
)

// kubeConfig is loam.toml of one database on the Kubernetes target, with extra keys in
// its [databases.target] and routers.
func kubeConfig(t *testing.T, target, routers string) *ctl.Config {
	t.Helper()
	cfg, err := ctl.ParseConfig("loam.toml", []byte("[[databases]]\nname = \"app\"\ninsecure = true\n"+
		"[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"pgdog-users\"\n"+target+routers))
	require.NoError(t, err)
	return cfg
}

// TestFleetsNameTheKey: what only the Kubernetes side can check (a label selector) is
// refused before the daemon starts, naming the key; a database without a namespace takes
// the controller's own, and none at all is refused by the key.
func TestFleetsNameTheKey(t *testing.T) {
	client := fake.NewClientset()
	_, err := kubernetes.Fleets(client, kubeConfig(t, "pods = \"app in (\"\n", ""), "pgdog")
	var ce *ctl.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "databases[0].target.pods", ce.Key)
	require.ErrorContains(t, err, "spec.selector")

	_, err = kubernetes.Fleets(client, kubeConfig(t, "", ""), "")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "databases[0].target.namespace", ce.Key)

	_, err = kubernetes.Fleets(client, kubeConfig(t, "", ""), "pgdog")
	require.NoError(t, err)
}

// TestFleetsOpen: a Kubernetes database's fleet writes its ConfigMap and Secret in the
// namespace, answers FilesSeen from each router's config_dir (what the pod sees there),
// and lists the roster from the pods; a files database is left as controller.OpenFleet
// opens it.
func TestFleetsOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	client := fake.NewClientset()
	cfg := kubeConfig(t, "pods = \"app.kubernetes.io/name=pgdog\"\n",
		"[[databases.routers]]\nid = \"pgdog-0\"\nadmin = \"127.0.0.1:1\"\nconfig_dir = \""+filepath.Join(dir, "pod-0")+"\"\n")
	files, err := ctl.ParseConfig("other.toml", []byte("[[databases]]\nname = \"other\"\nfiles_dir = \""+filepath.Join(dir, "files")+"\"\n"))
	require.NoError(t, err)
	cfg.Databases = append(cfg.Databases, files.Databases[0])
	open, err := kubernetes.Fleets(client, cfg, "pgdog")
	require.NoError(t, err)

	f, err := open(ctx, &cfg.Databases[0])
	require.NoError(t, err)
	defer f.Close()
	require.IsType(t, &kubernetes.Target{}, f.Target)
	require.Equal(t, "ConfigMap pgdog/pgdog", f.Target.(*kubernetes.Target).String())
	require.IsType(t, &kubernetes.PodRoster{}, f.Roster)
	require.Contains(t, f.Routers, "pgdog-0")

	g, err := f.FilesSeen(ctx, "pgdog-0")
	require.NoError(t, err)
	require.Zero(t, g, "nothing projected yet")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "pod-0"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pod-0", kubernetes.GenerationKey), []byte("7\n"), 0o600))
	g, err = f.FilesSeen(ctx, "pgdog-0")
	require.NoError(t, err)
	require.Equal(t, uint64(7), g, "the generation the pod's directory shows")
	_, err = f.FilesSeen(ctx, "pgdog-9")
	require.ErrorContains(t, err, "no config_dir")

	// The router's own Apply writes nothing into the pod's directory (the kubelet does):
	// it goes straight to RELOAD, which fails here (nobody listens).
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = f.Routers["pgdog-0"].Apply(actx, 8, render.Files{{Name: "pgdog.toml", Data: []byte("x")}})
	require.Error(t, err)
	_, err = os.Stat(filepath.Join(dir, "pod-0", "pgdog.toml"))
	require.ErrorIs(t, err, os.ErrNotExist, "Apply wrote into the pod's directory")
	o, err := open(ctx, &cfg.Databases[1])
	require.NoError(t, err)
	defer o.Close()
	require.Nil(t, o.Target, "a files database keeps files_dir")
	require.Nil(t, o.FilesSeen)
	require.Nil(t, o.Roster)
}

// TestControllerManifestRuns: deploy/kubernetes/controller.yaml runs loamrouter-kubernetes
// on the loam.toml of its own ConfigMap, at the path where it mounts it, with two
// replicas on a shared store, and that loam.toml is a valid config of the binary (the
// environment variables it names set, as the Deployment sets them from the Secret).
func TestControllerManifestRuns(t *testing.T) {
	var toml string
	var dep map[string]any
	for _, o := range manifests(t)["controller.yaml"] {
		switch o.GetKind() {
		case "ConfigMap":
			toml, _, _ = unstructured.NestedString(o.Object, "data", "loam.toml")
		case "Deployment":
			dep = o.Object
		}
	}
	require.NotEmpty(t, toml)
	require.NotNil(t, dep)
	replicas, _, _ := unstructured.NestedFieldNoCopy(dep, "spec", "replicas")
	require.EqualValues(t, 2, replicas)
	containers, _, _ := unstructured.NestedSlice(dep, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	c := containers[0].(map[string]any)
	cmd, _, _ := unstructured.NestedStringSlice(c, "command")
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	require.Equal(t, []string{"/loamrouter-kubernetes"}, cmd)
	require.Contains(t, args, "--config")
	confPath := args[1+slices.Index(args, "--config")]
	mounts, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	mounted := false
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["name"] == "config" && filepath.Join(m["mountPath"].(string), "loam.toml") == confPath {
			mounted = true
		}
	}
	require.True(t, mounted, "--config %s is the ConfigMap's loam.toml where the pod mounts it", confPath)
	envs, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range envs {
		name := e.(map[string]any)["name"].(string)
		secret, _, _ := unstructured.NestedString(e.(map[string]any), "valueFrom", "secretKeyRef", "name")
		require.Equal(t, "loam-router-credentials", secret, "%s comes from the Secret", name)
		t.Setenv(name, strings.Repeat("x", 32))
	}

	cfg, err := ctl.ParseConfig("controller.yaml:loam.toml", []byte(toml))
	require.NoError(t, err)
	require.NotEqual(t, "bolt", cfg.Store.Kind, "two replicas share the store (bolt is one process's)")
	require.Equal(t, ctl.TargetKubernetes, cfg.Databases[0].Target.Kind)
	_, err = kubernetes.Fleets(fake.NewClientset(), cfg, "pgdog")
	require.NoError(t, err)
}
