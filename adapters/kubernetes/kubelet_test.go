package kubernetes_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// kubelet is a stand-in, named as such, for the kubelet's projection of a ConfigMap and a
// Secret into pods: no kubelet can run here (it needs a container runtime and a node).
// It watches both objects on the real API server and, for each pod, a delay after every
// change, writes what it last saw into the pod's directory through configmap.Dir, which
// lays it out as the kubelet's atomic writer does (a new ..<timestamp> directory, then
// one rename of the ..data symlink). Like a projected volume holding both objects, it
// writes only when the ConfigMap and the Secret carry the same generation. The delay
// stands for the kubelet's sync period and cache TTL (a minute or more in a cluster).
type kubelet struct {
	t      *testing.T
	dirs   []*configmap.Dir
	delay  func(pod int) time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	cm     *corev1.ConfigMap
	secret *corev1.Secret
	timers []*time.Timer
	done   bool
}

func startKubelet(t *testing.T, c k8s.Interface, ns, cm, secret string, dirs []string, delay func(pod int) time.Duration) *kubelet {
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{t: t, delay: delay, cancel: cancel}
	for _, d := range dirs {
		dir, err := configmap.NewDir(d)
		if err != nil {
			t.Fatal(err)
		}
		k.dirs = append(k.dirs, dir)
	}
	k.wg.Add(2)
	go k.watch(ctx, func(opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", cm).String()
		return c.CoreV1().ConfigMaps(ns).Watch(ctx, opts)
	})
	go k.watch(ctx, func(opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", secret).String()
		return c.CoreV1().Secrets(ns).Watch(ctx, opts)
	})
	t.Cleanup(k.stop)
	return k
}

func (k *kubelet) stop() {
	k.cancel()
	k.wg.Wait()
	k.mu.Lock()
	k.done = true
	for _, tm := range k.timers {
		tm.Stop()
	}
	k.mu.Unlock()
}

// watch follows one object, starting again when the API server ends the watch.
func (k *kubelet) watch(ctx context.Context, start func(metav1.ListOptions) (watch.Interface, error)) {
	defer k.wg.Done()
	rv := ""
	for ctx.Err() == nil {
		w, err := start(metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			switch o := ev.Object.(type) {
			case *corev1.ConfigMap:
				rv = o.ResourceVersion
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					k.changed(func() { k.cm = o })
				}
			case *corev1.Secret:
				rv = o.ResourceVersion
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					k.changed(func() { k.secret = o })
				}
			}
		}
		w.Stop()
	}
}

func (k *kubelet) changed(set func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	set()
	for pod := range k.dirs {
		k.timers = append(k.timers, time.AfterFunc(k.delay(pod), func() { k.project(pod) }))
	}
}

// project writes what the kubelet last saw into pod's directory.
func (k *kubelet) project(pod int) {
	k.mu.Lock()
	defer k.mu.Unlock() // one projection at a time, none after stop
	cm, s := k.cm, k.secret
	if k.done || cm == nil || s == nil {
		return
	}
	gen, err := render.GenerationFromAnnotations(cm.Annotations)
	if err != nil {
		return
	}
	if sg, err := render.GenerationFromAnnotations(s.Annotations); err != nil || sg != gen {
		return // a push is between its two writes: wait for the ConfigMap to follow
	}
	data := map[string][]byte{}
	for name, v := range cm.Data {
		data[name] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	maps.Copy(data, s.Data)
	var fs []render.File
	for _, name := range slices.Sorted(maps.Keys(data)) {
		fs = append(fs, render.File{Name: name, Data: data[name]})
	}
	err = k.dirs[pod].WriteFiles(context.Background(), gen, fs)
	if err != nil && !errors.Is(err, adapters.ErrNewerGeneration) {
		k.t.Errorf("kubelet stand-in: projecting generation %d into pod %d: %v", gen, pod, err)
	}
}
