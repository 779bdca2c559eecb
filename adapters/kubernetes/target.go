package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
)

// The keys the target adds beside the rendered files, so that a pod which mounts the
// ConfigMap and the Secret can tell which generation it sees (annotations are not
// projected into volumes). Each holds the generation in decimal and a newline.
const (
	GenerationKey       = "router-generation"        // in the ConfigMap
	SecretGenerationKey = "router-secret-generation" // in the Secret
)

// TargetOptions name the objects a Target writes.
type TargetOptions struct {
	Namespace string
	// ConfigMap receives every rendered file except the SecretFiles.
	ConfigMap string
	// Secret receives the SecretFiles. It is required when the files include one.
	Secret string
	// SecretFiles are the files that hold credentials (default: users.toml, PgDog's users
	// and passwords). They never go into a ConfigMap, which any reader of the namespace's
	// configuration may read.
	SecretFiles []string
	// Create lets WriteFiles create a ConfigMap or Secret that does not exist. RBAC cannot
	// narrow "create" to a name, so the least-privilege deployment leaves this off and
	// creates both objects from deploy/kubernetes/config.yaml.
	Create bool
}

// Target is an adapters.ConfigTarget that writes a generation's files into a ConfigMap
// and a Secret through the Kubernetes API, each with one compare-and-set update (the
// resourceVersion read is the one written against) carrying the generation in the
// loam.dev/router-generation annotation.
//
// The two objects cannot change together, so the order is the protocol: the Secret first,
// then the ConfigMap, whose annotation says which generation the target holds. A crash
// between the two leaves the Secret one generation ahead, which only that generation's
// ConfigMap (the same push, retried) or a newer one follows. A target holding a newer
// generation in either object refuses an older one with *adapters.GenerationError.
//
// The credentials need get and update on the two named objects only (rbac.yaml in
// deploy/kubernetes).
type Target struct {
	client kubernetes.Interface
	o      TargetOptions

	beforeUpdate func() // tests only: runs between the read and the write of the ConfigMap
}

var _ adapters.ConfigTarget = (*Target)(nil)

// NewTarget returns a target writing through client.
func NewTarget(client kubernetes.Interface, o TargetOptions) (*Target, error) {
	if client == nil {
		return nil, errors.New("kubernetes: NewTarget: no client")
	}
	if o.SecretFiles == nil {
		o.SecretFiles = []string{"users.toml"}
	}
	for field, v := range map[string]string{"Namespace": o.Namespace, "ConfigMap": o.ConfigMap} {
		if v == "" {
			return nil, fmt.Errorf("kubernetes: TargetOptions.%s is empty; name the object the routers mount", field)
		}
	}
	for field, v := range map[string]string{"Namespace": o.Namespace, "ConfigMap": o.ConfigMap, "Secret": o.Secret} {
		if v == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			return nil, fmt.Errorf("kubernetes: TargetOptions.%s %q is not a valid object name: %s", field, v, strings.Join(errs, "; "))
		}
	}
	return &Target{client: client, o: o}, nil
}

// String names the target in errors.
func (t *Target) String() string {
	return "ConfigMap " + t.o.Namespace + "/" + t.o.ConfigMap
}

// Generation returns the generation the ConfigMap's annotation records, 0 when it has
// none (never written by Loam).
func (t *Target) Generation(ctx context.Context) (uint64, error) {
	cm, err := t.client.CoreV1().ConfigMaps(t.o.Namespace).Get(ctx, t.o.ConfigMap, metav1.GetOptions{})
	if err != nil {
		return 0, apiError("get", "ConfigMap", t.o.Namespace, t.o.ConfigMap, err)
	}
	return generationOf("ConfigMap", t.o.Namespace, cm.ObjectMeta)
}

// WriteFiles puts files in place as generation (see adapters.ConfigTarget): the
// SecretFiles into the Secret, the rest into the ConfigMap. Writing the generation the
// target holds, with the same files, changes nothing; with other files (a rotated password:
// a generation's files include its credentials) it replaces them, as configmap.Dir does. A
// conflict (another writer between the
// read and the write) is an *APIError matching ErrConflict; the caller's next attempt reads
// again.
func (t *Target) WriteFiles(ctx context.Context, generation uint64, files render.Files) error {
	if generation == 0 {
		return fmt.Errorf("kubernetes: %s: generation 0 is never written (records start at 1)", t)
	}
	if len(files) == 0 {
		return fmt.Errorf("kubernetes: %s: generation %d has no files; render the record first", t, generation)
	}
	plain, secret := map[string][]byte{}, map[string][]byte{}
	for _, f := range files {
		if errs := validation.IsConfigMapKey(f.Name); len(errs) > 0 {
			return fmt.Errorf("kubernetes: %s: file name %q cannot be a ConfigMap key: %s", t, f.Name, strings.Join(errs, "; "))
		}
		if f.Name == GenerationKey || f.Name == SecretGenerationKey {
			return fmt.Errorf("kubernetes: %s: file name %q is the target's own generation key; rename the file", t, f.Name)
		}
		dst := plain
		if slices.Contains(t.o.SecretFiles, f.Name) {
			dst = secret
		}
		if _, dup := dst[f.Name]; dup {
			return fmt.Errorf("kubernetes: %s: file %q given twice", t, f.Name)
		}
		dst[f.Name] = f.Data
	}
	if len(secret) > 0 && t.o.Secret == "" {
		return fmt.Errorf("kubernetes: %s: the files include credentials (%s) and TargetOptions.Secret is empty; name the Secret they go into (never a ConfigMap)", t, strings.Join(slices.Sorted(maps.Keys(secret)), ", "))
	}
	marker := []byte(strconv.FormatUint(generation, 10) + "\n")
	plain[GenerationKey] = marker

	// Read the ConfigMap first: it holds the target's generation, and the refusal to go
	// backwards must not depend on which object a stale writer reached.
	cms := t.client.CoreV1().ConfigMaps(t.o.Namespace)
	cm, err := cms.Get(ctx, t.o.ConfigMap, metav1.GetOptions{})
	cmExists := err == nil
	if err != nil && !(t.o.Create && apierrors.IsNotFound(err)) {
		return apiError("get", "ConfigMap", t.o.Namespace, t.o.ConfigMap, err)
	}
	cmInPlace := false
	if cmExists {
		cmGen, err := generationOf("ConfigMap", t.o.Namespace, cm.ObjectMeta)
		if err != nil {
			return err
		}
		if cmInPlace, err = t.check("ConfigMap", cmGen, generation, cmData(cm), plain); err != nil {
			return err
		}
	}
	if len(secret) > 0 {
		secret[SecretGenerationKey] = marker
		if err := t.writeSecret(ctx, generation, secret); err != nil {
			return err
		}
	}
	if cmInPlace {
		return nil // in place already (check found the same files)
	}
	if !cmExists {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: t.o.Namespace, Name: t.o.ConfigMap}}
	}
	setAnnotation(&cm.ObjectMeta, generation)
	cm.Data, cm.BinaryData = nil, nil
	for k, v := range plain {
		if utf8.Valid(v) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[k] = string(v)
		} else {
			if cm.BinaryData == nil {
				cm.BinaryData = map[string][]byte{}
			}
			cm.BinaryData[k] = v
		}
	}
	if t.beforeUpdate != nil {
		t.beforeUpdate()
	}
	if cmExists {
		// The update carries the resourceVersion read above: if anyone wrote since, the API
		// server answers 409 and nothing changes.
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: fieldManager})
		return apiErrorOrNil("update", "ConfigMap", t.o.Namespace, t.o.ConfigMap, err)
	}
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
	return apiErrorOrNil("create", "ConfigMap", t.o.Namespace, t.o.ConfigMap, err)
}

// fieldManager names Loam's writes in the objects' managedFields.
const fieldManager = "loam-router"

func (t *Target) writeSecret(ctx context.Context, generation uint64, data map[string][]byte) error {
	ss := t.client.CoreV1().Secrets(t.o.Namespace)
	s, err := ss.Get(ctx, t.o.Secret, metav1.GetOptions{})
	exists := err == nil
	if err != nil && !(t.o.Create && apierrors.IsNotFound(err)) {
		return apiError("get", "Secret", t.o.Namespace, t.o.Secret, err)
	}
	if exists {
		have, err := generationOf("Secret", t.o.Namespace, s.ObjectMeta)
		if err != nil {
			return err
		}
		inPlace, err := t.check("Secret", have, generation, s.Data, data)
		if err != nil || inPlace {
			return err
		}
	} else {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.o.Namespace, Name: t.o.Secret}, Type: corev1.SecretTypeOpaque}
	}
	setAnnotation(&s.ObjectMeta, generation)
	s.Data, s.StringData = data, nil
	if exists {
		_, err = ss.Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
		return apiErrorOrNil("update", "Secret", t.o.Namespace, t.o.Secret, err)
	}
	_, err = ss.Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	return apiErrorOrNil("create", "Secret", t.o.Namespace, t.o.Secret, err)
}

// check refuses to replace a newer generation, and reports whether the object already holds
// generation want with exactly these files (nothing to write). The same generation with
// other files is rewritten: its credentials were rotated.
func (t *Target) check(kind string, have, want uint64, data, files map[string][]byte) (inPlace bool, err error) {
	name := t.o.ConfigMap
	if kind == "Secret" {
		name = t.o.Secret
	}
	if have > want {
		return false, &adapters.GenerationError{Target: kind + " " + t.o.Namespace + "/" + name, Have: have, Want: want}
	}
	return have == want && sameData(data, files), nil
}

func generationOf(kind, ns string, m metav1.ObjectMeta) (uint64, error) {
	g, err := render.GenerationFromAnnotations(m.Annotations)
	if errors.Is(err, render.ErrNoGeneration) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kubernetes: %s %s/%s: %w: %w (fix or remove the annotation by hand; Loam writes only what it can read back)", kind, ns, m.Name, adapters.ErrCorrupt, err)
	}
	return g, nil
}

func setAnnotation(m *metav1.ObjectMeta, generation uint64) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[render.AnnotationGeneration] = strconv.FormatUint(generation, 10)
}

func cmData(cm *corev1.ConfigMap) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func apiErrorOrNil(op, kind, ns, name string, err error) error {
	if err == nil {
		return nil
	}
	return apiError(op, kind, ns, name, err)
}
