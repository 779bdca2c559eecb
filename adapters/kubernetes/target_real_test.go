package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/conformance/kubetest"
	"loam.dev/router/kernel/render"
)

func files(gen uint64) render.Files {
	fs, err := render.NewFiles(
		render.File{Name: "pgdog.toml", Data: fmt.Appendf(nil, "[general]\n# generation %d\n", gen)},
		render.File{Name: "users.toml", Data: fmt.Appendf(nil, "[[users]]\nname = \"app\"\npassword = \"secret-%d\"\n", gen)})
	if err != nil {
		panic(err)
	}
	return fs
}

func target(t *testing.T, c k8s.Interface, ns string, create bool) *kubernetes.Target {
	t.Helper()
	tg, err := kubernetes.NewTarget(c, kubernetes.TargetOptions{Namespace: ns, ConfigMap: "pgdog", Secret: "pgdog-users", Create: create})
	require.NoError(t, err)
	return tg
}

func objects(t *testing.T, c k8s.Interface, ns string) (*corev1.ConfigMap, *corev1.Secret) {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(context.Background(), "pgdog", metav1.GetOptions{})
	require.NoError(t, err)
	s, err := c.CoreV1().Secrets(ns).Get(context.Background(), "pgdog-users", metav1.GetOptions{})
	require.NoError(t, err)
	return cm, s
}

// TestRealTargetWrites: on a real kube-apiserver, the target creates the ConfigMap and
// the Secret (Create on), puts users.toml only in the Secret, annotates both with the
// generation, updates them for the next generation, changes nothing when the same
// generation is written again, and refuses an older generation or the same one with other
// files, leaving both objects as they were.
func TestRealTargetWrites(t *testing.T) {
	srv := kube.Get(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	ctx := context.Background()
	tg := target(t, admin, ns, true)

	require.NoError(t, tg.WriteFiles(ctx, 1, files(1)))
	cm, s := objects(t, admin, ns)
	require.Equal(t, "1", cm.Annotations[render.AnnotationGeneration])
	require.Equal(t, "1", s.Annotations[render.AnnotationGeneration])
	require.Equal(t, map[string]string{"pgdog.toml": "[general]\n# generation 1\n", kubernetes.GenerationKey: "1\n"}, cm.Data)
	require.NotContains(t, cm.Data, "users.toml", "credentials never go into a ConfigMap")
	require.Equal(t, files(1)[1].Data, s.Data["users.toml"])
	require.Equal(t, corev1.SecretTypeOpaque, s.Type)
	g, err := tg.Generation(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), g)

	require.NoError(t, tg.WriteFiles(ctx, 2, files(2)))
	cm2, s2 := objects(t, admin, ns)
	require.Equal(t, "2", cm2.Annotations[render.AnnotationGeneration])
	require.Equal(t, "2\n", cm2.Data[kubernetes.GenerationKey])
	require.Equal(t, "2\n", string(s2.Data[kubernetes.SecretGenerationKey]))
	require.NotEqual(t, cm.ResourceVersion, cm2.ResourceVersion)

	// The same generation again: nothing is written.
	require.NoError(t, tg.WriteFiles(ctx, 2, files(2)))
	cm3, s3 := objects(t, admin, ns)
	require.Equal(t, cm2.ResourceVersion, cm3.ResourceVersion)
	require.Equal(t, s2.ResourceVersion, s3.ResourceVersion)

	// Backwards: refused, as adapters.ErrNewerGeneration, and nothing changes.
	err = tg.WriteFiles(ctx, 1, files(1))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	var ge *adapters.GenerationError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, uint64(2), ge.Have)
	// The same generation with other files (a rotated password): written over, and the
	// same again changes nothing.
	other := files(2)
	other[0].Data = []byte("# another rendering\n")
	require.NoError(t, tg.WriteFiles(ctx, 2, other))
	cm4, s4 := objects(t, admin, ns)
	require.NotEqual(t, cm2.ResourceVersion, cm4.ResourceVersion, "the rotated files replace the old")
	require.NoError(t, tg.WriteFiles(ctx, 2, other))
	cm5, s5 := objects(t, admin, ns)
	require.Equal(t, cm4.ResourceVersion, cm5.ResourceVersion)
	require.Equal(t, s4.ResourceVersion, s5.ResourceVersion)

	// A file named like a generation key, or credentials without a Secret, are refused
	// before anything is sent.
	bad := append(render.Files{{Name: kubernetes.GenerationKey, Data: []byte("9\n")}}, files(3)...)
	require.ErrorContains(t, tg.WriteFiles(ctx, 3, bad), "generation key")
	noSecret, err := kubernetes.NewTarget(admin, kubernetes.TargetOptions{Namespace: ns, ConfigMap: "pgdog"})
	require.NoError(t, err)
	require.ErrorContains(t, noSecret.WriteFiles(ctx, 3, files(3)), "TargetOptions.Secret is empty")
}

// TestRealTargetNotFound: without Create, a missing ConfigMap is an *APIError matching
// ErrNotFound with the API server's 404, and nothing is created.
func TestRealTargetNotFound(t *testing.T) {
	srv := kube.Get(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	err := target(t, admin, ns, false).WriteFiles(context.Background(), 1, files(1))
	require.ErrorIs(t, err, kubernetes.ErrNotFound)
	var ae *kubernetes.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, int32(404), ae.Code)
	require.Equal(t, "ConfigMap", ae.Kind)
	require.Contains(t, err.Error(), "deploy/kubernetes")
	_, err = admin.CoreV1().Secrets(ns).Get(context.Background(), "pgdog-users", metav1.GetOptions{})
	require.Error(t, err)
}

// TestRealTargetLeastRBAC: the controller bound to kubernetes.Role (get and update on the
// two named objects) writes every generation; a user whose Role lacks update on the Secret
// is refused with ErrForbidden (403) and the ConfigMap is not touched, since the Secret is
// written first; and the controller may not read any other Secret.
func TestRealTargetLeastRBAC(t *testing.T) {
	srv, admin, ns := deployed(t, files(1))
	ctx := context.Background()
	tooSmall := kubernetes.Role(ns, "too-small", "pgdog", "pgdog-users")
	tooSmall.Rules[1].Verbs = []string{"get"}
	bind(t, admin, tooSmall, small)

	require.NoError(t, target(t, client(t, srv, controller), ns, false).WriteFiles(ctx, 2, files(2)))

	err := target(t, client(t, srv, small), ns, false).WriteFiles(ctx, 3, files(3))
	require.ErrorIs(t, err, kubernetes.ErrForbidden)
	var ae *kubernetes.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, int32(403), ae.Code)
	require.Equal(t, "update", ae.Op)
	require.Equal(t, "Secret", ae.Kind)
	require.NotContains(t, err.Error(), "secret-3", "an error never carries the credentials")
	cm, _ := objects(t, admin, ns)
	require.Equal(t, "2", cm.Annotations[render.AnnotationGeneration])

	_, err = admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client(t, srv, controller).CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
	require.Error(t, err, "the Role names its objects: no other Secret is readable")
	_, err = client(t, srv, controller).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.Error(t, err, "no list")
	// Without Create rights, the target cannot create what is missing.
	err = target(t, client(t, srv, controller), namespace(t, admin), true).WriteFiles(ctx, 1, files(1))
	require.ErrorIs(t, err, kubernetes.ErrForbidden)
}

// TestRealTargetStaleController: two controllers race. The stale one reads the ConfigMap
// at generation 1; before its update lands, the current one writes generation 3; the
// stale update of generation 2 carries the old resourceVersion and the API server refuses
// it (ErrConflict, 409). Its retry reads again and is refused as older than what is there
// (ErrNewerGeneration), so the files never go backwards.
func TestRealTargetStaleController(t *testing.T) {
	srv, admin, ns := deployed(t, files(1))
	ctx := context.Background()
	bind(t, admin, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loam-router-stale"}, Rules: kubernetes.Role(ns, "", "pgdog", "pgdog-users").Rules}, stale)

	current := target(t, client(t, srv, controller), ns, false)
	old := target(t, client(t, srv, stale), ns, false)
	old.SetBeforeUpdate(func() {
		old.SetBeforeUpdate(nil)
		require.NoError(t, current.WriteFiles(ctx, 3, files(3)))
	})
	err := old.WriteFiles(ctx, 2, files(2))
	require.ErrorIs(t, err, kubernetes.ErrConflict)
	var ae *kubernetes.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, int32(409), ae.Code)
	require.False(t, errors.Is(err, adapters.ErrNewerGeneration))

	err = old.WriteFiles(ctx, 2, files(2))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	cm, s := objects(t, admin, ns)
	require.Equal(t, "3", cm.Annotations[render.AnnotationGeneration])
	require.Equal(t, "3", s.Annotations[render.AnnotationGeneration])
	require.Equal(t, files(3)[0].Data, []byte(cm.Data["pgdog.toml"]))
}

// deployed is a namespace of the test's own holding the ConfigMap and the Secret at
// generation 1 (first), and the controller bound to kubernetes.Role.
func deployed(t *testing.T, first render.Files) (*kubetest.Server, k8s.Interface, string) {
	t.Helper()
	srv := kube.Get(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	require.NoError(t, target(t, admin, ns, true).WriteFiles(context.Background(), 1, first))
	bind(t, admin, kubernetes.Role(ns, "loam-router", "pgdog", "pgdog-users"), controller)
	return srv, admin, ns
}
