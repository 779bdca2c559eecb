package kubernetes_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	authv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/conformance/kubetest"
)

const deployDir = "../../deploy/kubernetes"

// manifests decodes every object of every YAML file in deploy/kubernetes.
func manifests(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	out := map[string][]*unstructured.Unstructured{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, p)
			if obj == nil {
				continue
			}
			out[filepath.Base(p)] = append(out[filepath.Base(p)], &unstructured.Unstructured{Object: obj})
		}
	}
	return out
}

// apply creates every object of file in ns, server-side dry run or for real. The API
// server validates each against its schema either way, so a misspelt field or a wrong
// type fails here.
func apply(t *testing.T, srv *kubetest.Server, ns string, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL, BearerToken: srv.Token(t, ""), TLSClientConfig: rest.TLSClientConfig{CAData: srv.CA}}
	dc, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	kc, err := k8s.NewForConfig(cfg)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(kc.Discovery())
	require.NoError(t, err)
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s", gvk, o.GetName())
		o.SetNamespace(ns)
		_, err = dc.Resource(m.Resource).Namespace(ns).Create(context.Background(), o, opts)
		require.NoError(t, err, "%s %s", gvk.Kind, o.GetName())
	}
}

// TestRealDeployManifests: every manifest in deploy/kubernetes is accepted by a real
// kube-apiserver with strict field validation (server-side dry run for the workloads);
// the Role in rbac.yaml is adapters/kubernetes.Role; the PgDog StatefulSet follows D306;
// and a token of the manifests' own service account writes a generation through the
// Target, while it may not touch any other Secret.
func TestRealDeployManifests(t *testing.T) {
	srv := kube.Get(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	ctx := context.Background()
	ms := manifests(t)
	for _, f := range []string{"controller.yaml", "pgdog.yaml"} {
		apply(t, srv, ns, ms[f], true)
	}
	apply(t, srv, ns, ms["config.yaml"], false)
	apply(t, srv, ns, ms["rbac.yaml"], false)

	role, err := admin.RbacV1().Roles(ns).Get(ctx, "loam-router", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, kubernetes.Role(ns, "loam-router", "pgdog", "pgdog-users").Rules, role.Rules)
	roster, err := admin.RbacV1().Roles(ns).Get(ctx, "loam-router-roster", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, kubernetes.RosterRole(ns, "loam-router-roster").Rules, roster.Rules)

	var sts map[string]any
	for _, o := range ms["pgdog.yaml"] {
		if o.GetKind() == "StatefulSet" {
			sts = o.Object
		}
	}
	require.NotNil(t, sts)
	env := map[string]any{}
	containers, _, _ := unstructured.NestedSlice(sts, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	list, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
	for _, e := range list {
		e := e.(map[string]any)
		env[e["name"].(string)] = e
	}
	nodeID, _, _ := unstructured.NestedString(env["NODE_ID"].(map[string]any), "valueFrom", "fieldRef", "fieldPath")
	require.Equal(t, "metadata.labels['apps.kubernetes.io/pod-index']", nodeID, "NODE_ID is the pod ordinal")
	require.Equal(t, "prod-app", env["DEPLOYMENT_ID"].(map[string]any)["value"], "DEPLOYMENT_ID is <cluster>-<db>")
	walDir := env["PGDOG_TWO_PHASE_COMMIT_WAL_DIR"].(map[string]any)["value"]
	mounts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "volumeMounts")
	onPV := false
	for _, m := range mounts {
		m := m.(map[string]any)
		if m["name"] == "wal" && m["mountPath"] == walDir {
			onPV = true
		}
	}
	require.True(t, onPV, "the 2PC WAL directory %v is the mount of the volume claim template", walDir)

	// The service account's own token, issued by the API server (TokenRequest), can write
	// through the Target with exactly the manifests' RBAC.
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "loam-router",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa, err := k8s.NewForConfig(&rest.Config{Host: srv.URL, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: srv.CA}})
	require.NoError(t, err)
	require.NoError(t, target(t, sa, ns, false).WriteFiles(ctx, 1, files(1)))
	require.NoError(t, target(t, sa, ns, false).WriteFiles(ctx, 2, files(2)))
	_, err = sa.CoreV1().Secrets(ns).Get(ctx, "loam-router-credentials", metav1.GetOptions{})
	require.Error(t, err)
	_, err = sa.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "escalate"}}, metav1.CreateOptions{})
	require.Error(t, err)
}

func ptr[T any](v T) *T { return &v }
