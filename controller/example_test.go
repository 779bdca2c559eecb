package controller_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// router is an embedder's own router instance: here a map entry that says which
// generation it routes by, and a channel told of every reload.
type router struct {
	id       string
	mu       *sync.Mutex
	gens     map[string]uint64
	reloaded chan<- string
}

func (r router) ID() string { return r.id }
func (r router) Apply(ctx context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	r.mu.Lock()
	r.gens[r.id] = gen
	r.mu.Unlock()
	select {
	case r.reloaded <- fmt.Sprintf("%s reloaded generation %d (%d files)", r.id, gen, len(files)):
	default: // nobody is counting any more
	}
	return adapters.Applied{Generation: gen}, nil
}
func (r router) Pause(context.Context, string) error  { return nil }
func (r router) Resume(context.Context, string) error { return nil }
func (r router) Observe(context.Context) (adapters.Observed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return adapters.Observed{Version: "example", Generation: r.gens[r.id], GenerationKnown: true}, nil
}

// target keeps the rendered files in memory instead of a ConfigMap.
type target struct{}

func (target) WriteFiles(context.Context, uint64, render.Files) error { return nil }

// Embedding a controller: a config built in Go (the struct loam.toml decodes into), the
// memory store, and a fleet of the embedder's own routers. Run pushes the record's
// generation to every router; Drain stops it and releases the lease.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.2", Port: 5432, Database: "app"})
	if _, err := st.CAS(ctx, ref, 0, rec); err != nil {
		fmt.Println(err)
		return
	}

	// The routers' files carry the passwords; the config names where they come from.
	os.Setenv("EXAMPLE_ADMIN_PW", "admin-secret")
	os.Setenv("EXAMPLE_APP_PW", "app-secret")
	off := false
	cfg := controller.Config{
		Controller: controller.ControllerConfig{ID: "embedded", Listen: "off"},
		Databases: []controller.DatabaseConfig{{Name: "app", Insecure: true,
			AppUser: "app", AppPasswordEnv: "EXAMPLE_APP_PW", AdminPasswordEnv: "EXAMPLE_ADMIN_PW",
			InDoubt: controller.InDoubtConfig{Enabled: &off},
			Routers: []controller.RouterConfig{{ID: "r1", Admin: "unused:1"}, {ID: "r2", Admin: "unused:2"}}}},
	}
	var mu sync.Mutex
	gens := map[string]uint64{}
	reloaded := make(chan string, 4)
	fleets := func(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
		f := controller.NewFleet()
		for _, id := range dc.RouterIDs() {
			f.Routers[id] = router{id: id, mu: &mu, gens: gens, reloaded: reloaded}
		}
		f.Target = target{}
		return f, nil
	}
	ctl, err := controller.New(cfg, controller.WithStore(st), controller.WithFleets(fleets))
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()

	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case r := <-reloaded:
			got[r] = true
		case <-ctx.Done():
			fmt.Println("no push:", ctx.Err())
			return
		}
	}
	fmt.Println(got["r1 reloaded generation 1 (2 files)"], got["r2 reloaded generation 1 (2 files)"])
	fmt.Println("leader:", ctl.Status().Leader)
	ctl.Drain()
	fmt.Println("run:", <-done)
	fmt.Println("leader after the drain:", ctl.Status().Leader)
	// Output:
	// true true
	// leader: true
	// run: <nil>
	// leader after the drain: false
}
