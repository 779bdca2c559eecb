package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
)

// PodIndexLabel is the label the StatefulSet controller puts on each pod with its
// ordinal (Kubernetes 1.28 and later); deploy/kubernetes/pgdog.yaml passes it to PgDog as
// NODE_ID.
const PodIndexLabel = "apps.kubernetes.io/pod-index"

// PodRoster is the in-doubt monitor's roster (adapters.Roster) from a PgDog StatefulSet:
// each running pod is one process, its ID the pod's ordinal (the NODE_ID its 2PC
// transaction names carry, D306) and its start time the PgDog container's
// state.running.startedAt, which a container restart moves (the pod's status.startTime
// does not, so it is used only when the container reports none). With start times the
// monitor tells a coordinator that restarted after it prepared a transaction (and will
// not finish it) from one still at work, and alerts at its Threshold instead of at
// StuckAfter.
//
// It needs list on pods in the namespace (RosterRole); RBAC cannot narrow list to the
// StatefulSet's pods.
type PodRoster struct {
	client    kubernetes.Interface
	namespace string
	selector  labels.Selector
	container string
}

var _ adapters.Roster = (*PodRoster)(nil)

// NewPodRoster lists the pods in namespace matching selector (the StatefulSet's
// spec.selector, e.g. "app.kubernetes.io/name=pgdog"); container names PgDog's container
// (default: the pod's first).
func NewPodRoster(client kubernetes.Interface, namespace, selector, container string) (*PodRoster, error) {
	if client == nil || namespace == "" {
		return nil, errors.New("kubernetes: NewPodRoster needs a client and the namespace of the PgDog StatefulSet")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: roster selector %q: %w (use the StatefulSet's spec.selector labels, e.g. app.kubernetes.io/name=pgdog)", selector, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("kubernetes: roster selector is empty; it would take every pod in %s for a PgDog", namespace)
	}
	return &PodRoster{client: client, namespace: namespace, selector: sel, container: container}, nil
}

// Processes lists the running PgDog pods. A pod being deleted, not yet running, or whose
// container is not running, is no live process: a transaction it prepared has no
// coordinator to finish it.
func (r *PodRoster) Processes(ctx context.Context) ([]adapters.RouterProcess, error) {
	pods, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: r.selector.String()})
	if err != nil {
		return nil, apiError("list", "Pod", r.namespace, r.selector.String(), err)
	}
	var out []adapters.RouterProcess
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		id, err := ordinal(&p)
		if err != nil {
			return nil, err
		}
		cs, ok := r.status(&p)
		if !ok || cs.State.Running == nil {
			continue
		}
		started := cs.State.Running.StartedAt.Time
		if started.IsZero() && p.Status.StartTime != nil {
			started = p.Status.StartTime.Time
		}
		out = append(out, adapters.RouterProcess{ID: id, Started: started})
	}
	return out, nil
}

// status finds the PgDog container's status.
func (r *PodRoster) status(p *corev1.Pod) (corev1.ContainerStatus, bool) {
	name := r.container
	if name == "" && len(p.Spec.Containers) > 0 {
		name = p.Spec.Containers[0].Name
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == name {
			return cs, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// ordinal is the pod's index: its PodIndexLabel, else the number after the last "-" of
// its name (<statefulset>-<ordinal>).
func ordinal(p *corev1.Pod) (string, error) {
	v, ok := p.Labels[PodIndexLabel]
	if !ok {
		i := strings.LastIndexByte(p.Name, '-')
		v = p.Name[i+1:]
	}
	if n, err := strconv.ParseUint(v, 10, 32); err != nil || strconv.FormatUint(n, 10) != v {
		return "", fmt.Errorf("kubernetes: pod %s/%s has no ordinal (label %s or a name ending in -<n>): is it a StatefulSet's pod? Narrow the roster selector to the PgDog StatefulSet", p.Namespace, p.Name, PodIndexLabel)
	}
	return v, nil
}

// RosterRole is what a PodRoster needs: list on pods in the namespace.
func RosterRole(namespace, name string) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
}
