package kubernetes_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/refrouter"
)

// pod is one PgDog pod as the push sees it: a reference router reading the files its
// kubelet projected into its directory. RELOAD re-reads them (PgDog re-reads the files it
// was started with; on Kubernetes nobody writes them but the kubelet), so Apply does not
// write anything.
type pod struct {
	*refrouter.Router
	reloads []uint64 // the generation each RELOAD loaded
}

func (p *pod) Apply(ctx context.Context, generation uint64, _ render.Files) (adapters.Applied, error) {
	if err := p.Reload(ctx); err != nil {
		return adapters.Applied{}, err
	}
	g, _ := p.Generation()
	p.reloads = append(p.reloads, g)
	return adapters.Applied{Generation: g}, nil
}

func record(gen uint64) *shardmap.Record {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "127.0.0.1", Port: 1, Database: "app_0"},
		shardmap.Backend{Host: "127.0.0.1", Port: 1, Database: "app_1"})
	rec.Generation, rec.Version = gen, gen*10
	return rec
}

func rendered(t *testing.T, rec *shardmap.Record) render.Files {
	t.Helper()
	fs, err := render.PgDog(rec, render.Credentials{Users: []render.User{{Name: "app", Password: "app-secret"}},
		Admin: render.Admin{Password: "admin-secret"}}, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	return fs
}

// TestRealPushThreePods: ConfigPush with AwaitFiles over three pods on a real API server.
// The controller writes the ConfigMap and the Secret through the least Role; a kubelet
// stand-in projects them into each pod's directory after a delay of 0.5–1 s; each pod's
// reference router is reloaded only once its directory shows the pushed generation, so
// every RELOAD loads it and every pod is confirmed on it. It logs the figure: the time
// from the Push to the Outcome, median over the pushes.
func TestRealPushThreePods(t *testing.T) {
	srv, admin, ns := deployed(t, rendered(t, record(1)))
	ctx := context.Background()

	const delay = time.Second
	root := t.TempDir()
	var dirs []string
	for i := range 3 {
		dirs = append(dirs, filepath.Join(root, fmt.Sprintf("pgdog-%d", i)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	startKubelet(t, admin, ns, "pgdog", "pgdog-users", dirs, func(int) time.Duration {
		return delay/2 + time.Duration(rng.Int64N(int64(delay/2)))
	})
	pods := map[string]adapters.RouterInstance{}
	var ids []string
	byID := map[string]*pod{}
	for i, d := range dirs {
		waitVisible(t, d, 1)
		r, err := refrouter.Open(refrouter.Options{ID: fmt.Sprintf("pgdog-%d", i), Dir: d, Database: "app", User: "app"})
		require.NoError(t, err)
		t.Cleanup(r.Close)
		p := &pod{Router: r}
		pods[r.ID()], byID[r.ID()] = p, p
		ids = append(ids, r.ID())
	}

	tg := target(t, client(t, srv, controller), ns, false)
	var outcome configpush.Outcome
	exec := &driver.ConfigPushExecutor{Target: tg, Instance: driver.Lookup(pods),
		FilesSeen: func(_ context.Context, id string) (uint64, error) {
			return kubernetes.VisibleGeneration(dirs[slices.Index(ids, id)])
		},
		OnOutcome: func(o configpush.Outcome) { outcome = o },
		Logger:    quietLogger()}
	opts := configpush.Options{AwaitFiles: true, Backoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, StepTimeout: 30 * time.Second}

	var took []time.Duration
	for gen := uint64(2); gen <= 6; gen++ {
		rec := record(gen)
		start := time.Now()
		err := driver.Run(ctx, driver.ConfigPush(exec, opts),
			driver.Config[configpush.Input]{ID: ns + "/app", Logger: exec.Logger, Trace: machine.Discard},
			configpush.Input(configpush.Push{Record: rec, Generation: gen, Files: rendered(t, rec), Instances: ids}))
		require.NoError(t, err)
		took = append(took, time.Since(start))
		require.Equal(t, ids, outcome.Confirmed, "generation %d: %v", gen, outcome)
		for _, id := range ids {
			g, ok := byID[id].Generation()
			require.True(t, ok)
			require.Equal(t, gen, g, id)
			// Every RELOAD of this push loaded the pushed generation: none was sent early.
			require.Equal(t, gen, byID[id].reloads[len(byID[id].reloads)-1], id)
		}
	}
	for id, p := range byID {
		require.Len(t, p.reloads, 5, "%s: one RELOAD per push, none wasted on old files: %v", id, p.reloads)
	}
	slices.Sort(took)
	t.Logf("generation confirmed on 3 pods: median %v over %d pushes (min %v, max %v), kubelet stand-in delay 0.5–1 s per pod",
		took[len(took)/2].Round(time.Millisecond), len(took), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

// waitVisible waits until dir shows generation gen (the kubelet stand-in's first sync).
func waitVisible(t *testing.T, dir string, gen uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		g, err := kubernetes.VisibleGeneration(dir)
		if err == nil && g >= gen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s shows generation %d (err %v), not %d, after a minute", dir, g, err, gen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
