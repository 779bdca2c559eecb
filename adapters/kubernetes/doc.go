// Package kubernetes is Loam's Kubernetes target: ConfigPush writes a generation's router
// files into the ConfigMap (and the credentials into the Secret) that the PgDog pods
// mount, through the Kubernetes API.
//
// It is a module of its own (loam.dev/router/adapters/kubernetes), so that importing
// loam.dev/router does not pull in client-go; `go get` it where the control plane runs on
// Kubernetes.
//
// Target (an adapters.ConfigTarget) puts every file but users.toml into the ConfigMap
// and users.toml into the Secret, never the other way: a ConfigMap is configuration any
// reader of the namespace may see. Each object is written with one compare-and-set update
// on the resourceVersion it was read at, carries the generation in the
// loam.dev/router-generation annotation (kernel/render.Annotations), and holds a key with
// the generation (GenerationKey, SecretGenerationKey) so a pod can tell which generation
// it sees. A write never moves either object back to an older generation
// (*adapters.GenerationError). API refusals are *APIError values matching ErrConflict,
// ErrForbidden or ErrNotFound, with the API server's status code.
//
// The kubelet projects an updated ConfigMap into a pod up to its sync period plus its
// cache TTL after the write, so RELOAD must wait until the pod sees the new files: run
// ConfigPush with configpush.Options.AwaitFiles and answer its AwaitFiles with
// VisibleGeneration on the directory where the pod mounts them.
//
// Fleets is the controller's opener on Kubernetes (controller.WithFleets): for each
// database whose [databases.target] kind is "kubernetes" it gives the fleet this Target,
// FilesSeen on the routers' config_dir and a PodRoster. cmd/loamrouter-kubernetes is the
// daemon of `loamrouter serve` (controller/daemon) with it: what deploy/kubernetes runs.
//
// Role is the least RBAC a Target needs (get and update on the two named objects); the
// manifests in deploy/kubernetes are the controller and PgDog deployments that use it, and
// the tests apply them to a real kube-apiserver (conformance/kubetest).
package kubernetes
