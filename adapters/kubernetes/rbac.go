package kubernetes

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Role is the least a Target needs, as a namespaced Role: get and update on the one
// ConfigMap and the one Secret it writes, by name, and nothing else (no list, no watch,
// no create, no other object). deploy/kubernetes/rbac.yaml is this Role for the example
// names; a test applies both and checks they match. Secret is omitted when empty.
//
// With TargetOptions.Create the Target also needs "create" on configmaps (and secrets),
// which RBAC cannot narrow to a name: it would let the controller create any ConfigMap in
// the namespace, which is why the deployment creates the objects instead.
func Role(namespace, name, configMap, secret string) *rbacv1.Role {
	r := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{configMap}, Verbs: []string{"get", "update"},
		}},
	}
	if secret != "" {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: []string{secret}, Verbs: []string{"get", "update"},
		})
	}
	return r
}
