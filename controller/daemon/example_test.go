package daemon_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/controller/daemon"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// router is a binary's own router instance: it tells a channel of every reload.
type router struct {
	id       string
	mu       sync.Mutex
	gen      uint64
	reloaded chan uint64
}

func (r *router) ID() string { return r.id }
func (r *router) Apply(_ context.Context, gen uint64, _ render.Files) (adapters.Applied, error) {
	r.mu.Lock()
	r.gen = gen
	r.mu.Unlock()
	select {
	case r.reloaded <- gen:
	default:
	}
	return adapters.Applied{Generation: gen}, nil
}
func (r *router) Pause(context.Context, string) error  { return nil }
func (r *router) Resume(context.Context, string) error { return nil }
func (r *router) Observe(context.Context) (adapters.Observed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return adapters.Observed{Version: "example", Generation: r.gen, GenerationKnown: true}, nil
}

type nowhere struct{}

func (nowhere) WriteFiles(context.Context, uint64, render.Files) error { return nil }

// A binary runs the daemon with Serve, giving its own Opener (loamrouter-kubernetes gives
// adapters/kubernetes.Fleets): here a memory store and one router. Ending the context
// drains the daemon, which returns nil once the lease is released.
func ExampleServe() {
	st := memstore.New()
	defer st.Close()
	ctx, drain := context.WithCancel(context.Background())
	defer drain()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"})
	if _, err := st.CAS(ctx, ref, 0, rec); err != nil {
		fmt.Println(err)
		return
	}
	os.Setenv("EXAMPLE_PW", "secret")
	off := false
	cfg, err := controller.ParseConfig("example.toml", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Controller.Listen = "off"
	cfg.Databases = []controller.DatabaseConfig{{Name: "app", Insecure: true, AppUser: "app", AppPasswordEnv: "EXAMPLE_PW", AdminPasswordEnv: "EXAMPLE_PW",
		InDoubt: controller.InDoubtConfig{Enabled: &off}, Routers: []controller.RouterConfig{{ID: "r1", Admin: "unused:1"}}}}
	r1 := &router{id: "r1", reloaded: make(chan uint64, 1)}
	open := func(context.Context, *controller.DatabaseConfig) (*controller.Fleet, error) {
		f := controller.NewFleet()
		f.Routers["r1"], f.Target = r1, nowhere{}
		return f, nil
	}
	log, _ := daemon.NewLogger(io.Discard, "text", "info")
	done := make(chan error, 1)
	go func() { done <- daemon.Serve(ctx, cfg, st, daemon.Options{Log: log, Open: open}) }()
	select {
	case gen := <-r1.reloaded:
		fmt.Println("r1 reloaded generation", gen)
	case <-time.After(time.Minute):
		fmt.Println("no push")
	}
	drain()
	fmt.Println("served:", <-done)
	// Output:
	// r1 reloaded generation 1
	// served: <nil>
}
