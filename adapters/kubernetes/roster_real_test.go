package kubernetes_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/driver"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// shard lists one prepared transaction (the shard side is not what this test is about;
// adapters/postgres is tested against real Postgres).
type shard struct{ xs []adapters.PreparedXact }

func (s shard) Prepared(context.Context) ([]adapters.PreparedXact, error) { return s.xs, nil }

type alerts struct {
	mu     sync.Mutex
	raised map[string]indoubt.Alert
}

func (a *alerts) Raise(_ context.Context, al indoubt.Alert) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.raised[al.ID] = al
	return nil
}

func (a *alerts) Clear(_ context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.raised, id)
	return nil
}

func (a *alerts) get(id string) (indoubt.Alert, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.raised[id]
	return al, ok
}

// setRunning sets pod's status as a kubelet would: running, its container started at
// started after restarts restarts.
func setRunning(t *testing.T, c k8s.Interface, p *corev1.Pod, podStart, started time.Time, restarts int32) *corev1.Pod {
	t.Helper()
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: podStart},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "pgdog", Image: "ghcr.io/pgdogdev/pgdog:v0.1.54", ImageID: "sha256:0", Ready: true,
			RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started}}}}}}
	p, err := c.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

// TestRealRosterRestart: the in-doubt monitor's roster from a StatefulSet's pods on a real
// API server. Pod pgdog-1 (NODE_ID 1) started ten minutes ago and holds a transaction it
// prepared a minute ago: its coordinator is at work, so nothing is alerted (StuckAfter is an
// hour). Its container restarts (a new startedAt, restartCount 1): the coordinator that
// prepared it is gone, and the monitor alerts at its one-second Threshold, not at
// StuckAfter. A pod not running is no process at all.
func TestRealRosterRestart(t *testing.T) {
	srv := kube.Get(t)
	admin := client(t, srv, "")
	ns := namespace(t, admin)
	ctx := context.Background()
	bind(t, admin, kubernetes.RosterRole(ns, "loam-router-roster"), controller)

	now := time.Now().Truncate(time.Second)
	mk := func(name, index string) *corev1.Pod {
		p, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "pgdog", kubernetes.PodIndexLabel: index}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pgdog", Image: "ghcr.io/pgdogdev/pgdog:v0.1.54"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}
	p1 := setRunning(t, admin, mk("pgdog-1", "1"), now.Add(-10*time.Minute), now.Add(-10*time.Minute), 0)
	mk("pgdog-2", "2") // pending: no process

	roster, err := kubernetes.NewPodRoster(client(t, srv, controller), ns, "app.kubernetes.io/name=pgdog", "pgdog")
	require.NoError(t, err)
	ps, err := roster.Processes(ctx)
	require.NoError(t, err)
	require.Equal(t, []adapters.RouterProcess{{ID: "1", Started: now.Add(-10 * time.Minute)}}, normalize(ps))

	sink := &alerts{raised: map[string]indoubt.Alert{}}
	exec := &driver.InDoubtExecutor{
		Shard: driver.Lookup(map[string]driver.PreparedLister{"s0": shard{[]adapters.PreparedXact{{
			GID: "__pgdog_2pc_prod-app_1_99_0", Prepared: now.Add(-time.Minute), Owner: "app", Database: "app_0"}}}}),
		Roster: roster, Alerts: sink, Logger: quietLogger(),
	}
	inputs := make(chan indoubt.Input, 1)
	inputs <- indoubt.Track{Shards: []string{"s0"}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	opts := indoubt.Options{Period: 100 * time.Millisecond, Threshold: time.Second, StuckAfter: time.Hour, Deployment: "prod-app"}
	go func() {
		done <- driver.Run(runCtx, driver.InDoubt(exec, opts),
			driver.Config[indoubt.Input]{ID: ns + "/app", Logger: exec.Logger, Trace: machine.Discard, Inputs: inputs})
	}()
	defer func() {
		cancel()
		<-done
	}()
	// Several rounds with the coordinator alive and older than its transaction: no alert.
	// (A loaded machine runs fewer rounds; it cannot make an alert appear.)
	time.Sleep(2 * time.Second)
	_, raised := sink.get("coordinator/1")
	require.False(t, raised, "a live coordinator that started before its transaction is not alerted before StuckAfter")

	setRunning(t, admin, p1, now.Add(-10*time.Minute), time.Now(), 1)
	require.Eventually(t, func() bool { _, ok := sink.get("coordinator/1"); return ok }, time.Minute, 50*time.Millisecond,
		"the coordinator restarted after preparing: the monitor must alert at the threshold")
	al, _ := sink.get("coordinator/1")
	require.Equal(t, indoubt.ReasonRestarted, al.Reason, "alerted for the restart, not for StuckAfter: %v", al)
}

func normalize(ps []adapters.RouterProcess) []adapters.RouterProcess {
	for i := range ps {
		ps[i].Started = ps[i].Started.Local().Truncate(time.Second)
	}
	return ps
}
