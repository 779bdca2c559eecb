package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"loam.dev/router/conformance/kubetest"
)

// The users the tests act as besides the admin: a controller bound to the least Role, a
// second (stale) controller bound to the same, and one bound to a Role too small.
const (
	controller = "loam-controller"
	stale      = "stale-controller"
	small      = "small-role"
)

var kube = kubetest.NewShared(controller, stale, small)

func TestMain(m *testing.M) {
	code := m.Run()
	kube.Close()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// client returns a clientset acting as user ("" for the admin).
func client(t *testing.T, srv *kubetest.Server, user string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, BearerToken: srv.Token(t, user),
		TLSClientConfig: rest.TLSClientConfig{CAData: srv.CA}, QPS: 100, Burst: 200})
	require.NoError(t, err)
	return c
}

var nsSeq atomic.Int64

// namespace creates a namespace of the test's own (the server is shared).
func namespace(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	name = strings.TrimRight(name, "-")
	_, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

// bind creates role in its namespace and binds it to user.
func bind(t *testing.T, admin kubernetes.Interface, role *rbacv1.Role, user string) {
	t.Helper()
	ctx := context.Background()
	_, err := admin.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(role.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: role.Name + "-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
