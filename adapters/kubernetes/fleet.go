package kubernetes

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
)

// Fleets is the controller.Opener of a daemon on Kubernetes (cmd/loamrouter-kubernetes):
// every database opens as controller.OpenFleet opens it (PgDog admin databases, shards),
// and one whose [databases.target] kind is "kubernetes" also gets
//
//   - Fleet.Target: a Target on target.configmap and target.secret in target.namespace
//     (default namespace: the controller's own, from its service account or kubeconfig);
//   - Fleet.FilesSeen, when its routers give config_dir: VisibleGeneration there, so each
//     RELOAD waits until the pod's files show the pushed generation;
//   - Fleet.Roster, when target.pods is set: a PodRoster on that selector.
//
// Every such database is checked here, before the daemon starts: a mistake is a
// *controller.ConfigError naming the key.
func Fleets(client kubernetes.Interface, cfg *controller.Config, namespace string) (controller.Opener, error) {
	type kube struct {
		target *Target
		roster *PodRoster
		dirs   map[string]string
	}
	byRef := map[adapters.DBRef]kube{}
	for i := range cfg.Databases {
		dc := &cfg.Databases[i]
		tc := dc.Target
		if tc.Kind != controller.TargetKubernetes {
			continue
		}
		at := fmt.Sprintf("databases[%d].target", i)
		bad := func(key string, err error) error {
			return &controller.ConfigError{Path: cfg.Source(), Key: at + "." + key, Msg: err.Error()}
		}
		ns := tc.Namespace
		if ns == "" {
			if namespace == "" {
				return nil, bad("namespace", fmt.Errorf("not set, and the controller does not run in a pod nor has a namespace in its kubeconfig: name the namespace of the ConfigMap, the Secret and the PgDog pods"))
			}
			ns = namespace
		}
		var k kube
		var err error
		if k.target, err = NewTarget(client, TargetOptions{Namespace: ns, ConfigMap: tc.ConfigMap, Secret: tc.Secret}); err != nil {
			return nil, bad("configmap", err)
		}
		if tc.Pods != "" {
			if k.roster, err = NewPodRoster(client, ns, tc.Pods, tc.Container); err != nil {
				return nil, bad("pods", err)
			}
		}
		for _, r := range dc.Routers {
			if r.ConfigDir != "" {
				if k.dirs == nil {
					k.dirs = map[string]string{}
				}
				k.dirs[r.ID] = r.ConfigDir
			}
		}
		byRef[adapters.DBRef{Namespace: dc.Namespace, Database: dc.Name}] = k
	}
	return func(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
		f, err := controller.OpenFleet(ctx, dc)
		if err != nil {
			return nil, err
		}
		k, ok := byRef[adapters.DBRef{Namespace: dc.Namespace, Database: dc.Name}]
		if !ok {
			return f, nil
		}
		f.Target = k.target
		if k.roster != nil {
			f.Roster = k.roster
		}
		if k.dirs != nil {
			f.FilesSeen = func(_ context.Context, id string) (uint64, error) {
				dir, ok := k.dirs[id]
				if !ok {
					return 0, fmt.Errorf("kubernetes: router %q has no config_dir to read what its pod sees", id)
				}
				return VisibleGeneration(dir)
			}
		}
		return f, nil
	}, nil
}
