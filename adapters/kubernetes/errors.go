package kubernetes

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sentinels for errors.Is; every error this package returns for an API refusal is an
// *APIError wrapping one of them (and the API server's own error, for its status code).
var (
	// ErrConflict: the object changed between the read and the write (HTTP 409 on the
	// resourceVersion). Another writer got there first; read again and decide again,
	// which the push machine does on its next attempt.
	ErrConflict = errors.New("kubernetes: the object changed since it was read (resourceVersion conflict)")
	// ErrForbidden: the credentials may not do this (HTTP 403). Not retried: apply the
	// Role in deploy/kubernetes/rbac.yaml to the controller's service account.
	ErrForbidden = errors.New("kubernetes: forbidden by RBAC")
	// ErrNotFound: the ConfigMap or Secret does not exist (HTTP 404). The controller may
	// only get and update them (see the Role); create them with deploy/kubernetes/, or set
	// TargetOptions.Create where the credentials may create.
	ErrNotFound = errors.New("kubernetes: object not found")
)

// APIError is an API server refusal on one object.
type APIError struct {
	Op     string // "get", "update", "create"
	Kind   string // "ConfigMap", "Secret", "Pod"
	Object string // namespace/name
	Code   int32  // the HTTP status the API server answered with
	Reason string // its metav1.StatusReason (Conflict, Forbidden, NotFound, ...)
	kind   error  // the sentinel
	err    error  // the API server's error
}

func (e *APIError) Error() string {
	hint := ""
	switch e.kind {
	case ErrConflict:
		hint = "; another writer updated it after it was read: read it again and retry"
	case ErrForbidden:
		hint = "; grant the verb on this object to the caller (deploy/kubernetes/rbac.yaml lists what the controller needs)"
	case ErrNotFound:
		hint = "; create it first (deploy/kubernetes/config.yaml), or let the target create it (TargetOptions.Create)"
	}
	return fmt.Sprintf("kubernetes: %s %s %s: %s (%d %s)%s", e.Op, e.Kind, e.Object, e.err, e.Code, e.Reason, hint)
}

// Unwrap gives both the sentinel and the API server's error to errors.Is and errors.As.
func (e *APIError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.err}
	}
	return []error{e.kind, e.err}
}

// apiError classifies an error from client-go, or returns it wrapped with where it
// happened when it is not an API status (a network error, a cancelled context).
func apiError(op, kind, ns, name string, err error) error {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Errorf("kubernetes: %s %s %s/%s: %w", op, kind, ns, name, err)
	}
	s := st.Status()
	e := &APIError{Op: op, Kind: kind, Object: ns + "/" + name, Code: s.Code, Reason: string(s.Reason), err: err}
	switch {
	case apierrors.IsConflict(err):
		e.kind = ErrConflict
	case apierrors.IsForbidden(err):
		e.kind = ErrForbidden
	case apierrors.IsNotFound(err):
		e.kind = ErrNotFound
	}
	return e
}
