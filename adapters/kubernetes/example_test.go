package kubernetes_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/kubernetes"
	ctl "loam.dev/router/controller"
	"loam.dev/router/kernel/render"
)

// A push writes generation 3 of PgDog's files: pgdog.toml into the ConfigMap, users.toml
// into the Secret, both annotated; a late write of generation 2 is refused. (The client
// here is client-go's fake; the tests run the same against a real kube-apiserver.)
func ExampleTarget() {
	ctx := context.Background()
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pgdog"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pgdog-users"}})
	target, err := kubernetes.NewTarget(client, kubernetes.TargetOptions{Namespace: "db", ConfigMap: "pgdog", Secret: "pgdog-users"})
	if err != nil {
		fmt.Println(err)
		return
	}
	files := render.Files{
		{Name: "pgdog.toml", Data: []byte("[general]\n")},
		{Name: "users.toml", Data: []byte("[[users]]\n")},
	}
	if err := target.WriteFiles(ctx, 3, files); err != nil {
		fmt.Println(err)
		return
	}
	cm, _ := client.CoreV1().ConfigMaps("db").Get(ctx, "pgdog", metav1.GetOptions{})
	fmt.Println("annotation:", cm.Annotations[render.AnnotationGeneration])
	_, inConfigMap := cm.Data["users.toml"]
	fmt.Println("users.toml in the ConfigMap:", inConfigMap)
	err = target.WriteFiles(ctx, 2, files)
	fmt.Println("generation 2 refused:", errors.Is(err, adapters.ErrNewerGeneration))
	// Output:
	// annotation: 3
	// users.toml in the ConfigMap: false
	// generation 2 refused: true
}

// The least RBAC of a Target, as deploy/kubernetes/rbac.yaml has it.
func ExampleRole() {
	for _, r := range kubernetes.Role("db", "loam-router", "pgdog", "pgdog-users").Rules {
		fmt.Println(r.Resources, r.ResourceNames, r.Verbs)
	}
	// Output:
	// [configmaps] [pgdog] [get update]
	// [secrets] [pgdog-users] [get update]
}

// An embedding control plane on Kubernetes plugs Fleets into its controller: the
// database's [databases.target] names the ConfigMap and the Secret, and its fleet writes
// them (cmd/loamrouter-kubernetes does the same around controller/daemon).
func ExampleFleets() {
	cfg, err := ctl.ParseConfig("loam.toml", []byte(`
[[databases]]
name = "app"
insecure = true

[databases.target]
kind = "kubernetes"
configmap = "pgdog"
secret = "pgdog-users"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	open, err := kubernetes.Fleets(fake.NewClientset(), cfg, "db")
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := open(context.Background(), &cfg.Databases[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	fmt.Println("files go to:", f.Target)
	// ctl.New(*cfg, ctl.WithStore(store), ctl.WithFleets(open)) runs it.
	// Output:
	// files go to: ConfigMap db/pgdog
}
