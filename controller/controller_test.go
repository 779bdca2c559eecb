package controller_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// TestNewValidatesACopy: a config built in Go is checked as loam.toml is (the error names
// the key), the defaults are filled in the controller's copy, and the caller's value is
// left as it was.
func TestNewValidatesACopy(t *testing.T) {
	st := memstore.New()
	_, err := controller.New(controller.Config{Controller: controller.ControllerConfig{LeaseTTL: controller.Duration{Duration: 10 * time.Millisecond}}}, controller.WithStore(st))
	var ce *controller.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "controller.lease_ttl", ce.Key)
	require.ErrorIs(t, err, controller.ErrConfig)

	_, err = controller.New(controller.Config{})
	require.ErrorIs(t, err, controller.ErrNoStore)

	cfg := controller.Config{Controller: controller.ControllerConfig{Listen: "off"},
		Databases: []controller.DatabaseConfig{{Name: "app", Routers: []controller.RouterConfig{{ID: "r1", Admin: "h:1"}}}}}
	ctl, err := controller.New(cfg, controller.WithStore(st))
	require.NoError(t, err)
	require.Equal(t, "default", ctl.Config().Databases[0].Namespace, "the controller's copy has the defaults")
	require.Equal(t, "pgdog", ctl.Config().Databases[0].Routers[0].Kind)
	require.Empty(t, cfg.Databases[0].Namespace, "the caller's config is not changed")
	require.Empty(t, cfg.Databases[0].Routers[0].Kind)
	require.False(t, ctl.Status().Leader, "nothing runs before Run")

	// A Kubernetes target needs an opener that writes the ConfigMap: the default one
	// refuses it by the key, instead of pushing nowhere.
	kube := cfg
	kube.Databases = []controller.DatabaseConfig{{Name: "app", Target: controller.TargetConfig{Kind: controller.TargetKubernetes, ConfigMap: "pgdog", Secret: "pgdog-users"}}}
	_, err = controller.New(kube, controller.WithStore(st))
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "databases[0].target.kind", ce.Key)
	require.ErrorContains(t, err, "loamrouter-kubernetes")
	_, err = controller.New(kube, controller.WithStore(st), controller.WithFleets(controller.OpenFleet))
	require.NoError(t, err, "an opener given: it is the opener's to set the target")
}

// TestRequests: the requests refuse what the controller could not run, with errors to
// branch on: a second cutover, a decision without one, a failover of a shard the record
// does not have.
func TestRequests(t *testing.T) {
	ctx := t.Context()
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.2", Port: 5432, Database: "app"})
	_, err := st.CAS(ctx, ref, 0, rec)
	require.NoError(t, err)
	r := controller.Requests{Store: st, By: "test"}

	require.ErrorIs(t, r.DecideCutover(ctx, ref, controller.Finalize), controller.ErrNoCutover)
	req, err := r.StartCutover(ctx, ref, cutover.Plan{Designated: "r1"})
	require.NoError(t, err)
	require.Equal(t, rec.Generation, req.From, "the cutover starts from the record's generation")
	_, err = r.StartCutover(ctx, ref, cutover.Plan{Designated: "r1"})
	require.ErrorIs(t, err, adapters.ErrConflict, "one cutover at a time")
	require.NoError(t, r.DecideCutover(ctx, ref, controller.Reverse))
	require.NoError(t, r.DecideCutover(ctx, ref, controller.Finalize), "a later decision replaces the first")
	dec, _, err := controller.GetJSON[controller.CutoverDecision](ctx, st, controller.CutoverDecisionKey(ref))
	require.NoError(t, err)
	require.Equal(t, controller.Finalize, dec.Decision)
	require.Error(t, r.DecideCutover(ctx, ref, "maybe"))

	_, err = r.Failover(ctx, ref, "s9", shardmap.Backend{Host: "10.0.0.9", Port: 5432})
	require.ErrorIs(t, err, controller.ErrNoShard)
	fo, err := r.Failover(ctx, ref, rec.Shards[1].Name, shardmap.Backend{Host: "10.0.0.9", Port: 5432})
	require.NoError(t, err)
	require.Equal(t, "app", fo.Promoted.Database, "the promoted primary's database defaults to the shard's")
	_, err = r.FailoverOutcome(ctx, ref, fo)
	require.True(t, errors.Is(err, adapters.ErrNotFound), "no outcome before a controller ran it: %v", err)
}

// oneRouter runs a controller of one database with one router, r1, on a memory store
// holding a record; fleet fills r1 (told of its reloads on the channel) into the fleet. It
// returns the record and the channel of r1's reloads; the controller is drained when the
// test ends.
func oneRouter(t *testing.T, tc controller.TargetConfig, fleet func(f *controller.Fleet, r1 router)) (*shardmap.Record, <-chan string) {
	t.Helper()
	// Not t.Context(): it is cancelled before the Cleanup that drains, and Run would then
	// return the cancellation instead of the drain's nil (CI: TestFleetFilesSeenHoldsTheReload).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"})
	_, err := st.CAS(ctx, ref, 0, rec)
	require.NoError(t, err)
	t.Setenv("ONE_ROUTER_PW", "secret")
	off := false
	cfg := controller.Config{Controller: controller.ControllerConfig{ID: "one", Listen: "off"},
		Databases: []controller.DatabaseConfig{{Name: "app", Insecure: true, AppUser: "app", AppPasswordEnv: "ONE_ROUTER_PW", AdminPasswordEnv: "ONE_ROUTER_PW",
			Target: tc, InDoubt: controller.InDoubtConfig{Enabled: &off}, Routers: []controller.RouterConfig{{ID: "r1", Admin: "unused:1"}}}}}
	reloaded := make(chan string, 4)
	r1 := router{id: "r1", mu: &sync.Mutex{}, gens: map[string]uint64{}, reloaded: reloaded}
	fleets := func(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
		f := controller.NewFleet()
		f.Target = target{}
		fleet(f, r1)
		return f, nil
	}
	ctl, err := controller.New(cfg, controller.WithStore(st), controller.WithFleets(fleets))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() {
		ctl.Drain()
		require.NoError(t, <-done)
		cancel()
	})
	return rec, reloaded
}

// TestFleetFilesSeenHoldsTheReload: a fleet whose files reach the routers late (the
// kubelet projecting a ConfigMap) gives FilesSeen; the push then reloads no router before
// it sees the pushed generation, however often it asks, and reloads it once it does.
func TestFleetFilesSeenHoldsTheReload(t *testing.T) {
	var visible, asked atomic.Uint64
	rec, reloaded := oneRouter(t, controller.TargetConfig{}, func(f *controller.Fleet, r1 router) {
		f.Routers["r1"] = r1
		f.FilesSeen = func(_ context.Context, id string) (uint64, error) {
			asked.Add(1)
			return visible.Load(), nil
		}
	})
	require.Eventually(t, func() bool { return asked.Load() >= 3 }, time.Minute, 10*time.Millisecond, "the push asks what r1 sees")
	select {
	case r := <-reloaded:
		t.Fatalf("reloaded before the files were visible: %s", r)
	default:
	}
	visible.Store(rec.Generation)
	select {
	case r := <-reloaded:
		require.Equal(t, fmt.Sprintf("r1 reloaded generation %d (2 files)", rec.Generation), r)
	case <-time.After(2 * time.Minute):
		t.Fatal("no reload once the files were visible")
	}
}

// notLoaded is a router whose first fails RELOADs re-read the old files (the kubelet has
// not projected the new ones yet), as the PgDog adapter reports it (ErrNotLoaded).
type notLoaded struct {
	router
	fails *atomic.Int64
}

func (r notLoaded) Apply(ctx context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	if r.fails.Add(-1) >= 0 {
		return adapters.Applied{}, errors.New("RELOAD re-read the old files (generation marker not shown)")
	}
	return r.router.Apply(ctx, gen, files)
}

// TestLateFilesRetriedLonger: a target whose files reach the routers late, with no
// FilesSeen to wait on (kind kubernetes without config_dir), retries a RELOAD that re-read
// old files past the default five attempts, so a slow kubelet does not leave the pod
// stuck on the push.
func TestLateFilesRetriedLonger(t *testing.T) {
	fails := &atomic.Int64{}
	fails.Store(6) // one more than configpush's default MaxAttempts
	rec, reloaded := oneRouter(t, controller.TargetConfig{Kind: controller.TargetKubernetes, ConfigMap: "pgdog", Secret: "pgdog-users"}, func(f *controller.Fleet, r1 router) {
		f.Routers["r1"] = notLoaded{r1, fails}
	})
	select {
	case r := <-reloaded:
		require.Equal(t, fmt.Sprintf("r1 reloaded generation %d (2 files)", rec.Generation), r)
	case <-time.After(2 * time.Minute):
		t.Fatal("the RELOAD was given up on before the files arrived")
	}
}
