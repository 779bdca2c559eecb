// Command embed is a control plane of someone else's that embeds Loam Router's
// controller: its own store (the memory one), its own routers and shards (in memory), a
// config built in Go. It runs a ConfigPush and checks a cutover plan, and prints what
// happened for the test that builds it as an external module.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// fleet is the embedder's routers: the generation each routes by.
type fleet struct {
	mu   sync.Mutex
	gens map[string]uint64
}

type router struct {
	id string
	f  *fleet
}

func (r router) ID() string { return r.id }
func (r router) Apply(_ context.Context, gen uint64, _ render.Files) (adapters.Applied, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.gens[r.id] = gen
	return adapters.Applied{Generation: gen}, nil
}
func (r router) Pause(context.Context, string) error  { return nil }
func (r router) Resume(context.Context, string) error { return nil }
func (r router) Observe(context.Context) (adapters.Observed, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return adapters.Observed{Version: "embedded", Generation: r.f.gens[r.id], GenerationKnown: true}, nil
}

// The designated router can reshard; no task is running.
func (r router) CopyData(context.Context, string, string, string, string) (int64, error) {
	return 0, errors.New("not in this program")
}
func (r router) Tasks(context.Context) ([]adapters.Task, error)            { return nil, nil }
func (r router) SlotLag(context.Context, string, int) (int64, bool, error) { return 0, false, nil }
func (r router) Cutover(context.Context, int64) error                      { return errors.New("not in this program") }
func (r router) StopTask(context.Context, int64) error                     { return nil }

// shard is a primary that answers.
type shard struct{}

func (shard) Status(context.Context) (adapters.BackendStatus, error) {
	return adapters.BackendStatus{Role: adapters.RolePrimary, Position: "0/1"}, nil
}
func (shard) FenceWrites(context.Context, string) error                 { return nil }
func (shard) UnfenceWrites(context.Context, string) error               { return nil }
func (shard) Prepared(context.Context) ([]adapters.PreparedXact, error) { return nil, nil }
func (shard) Checksum(context.Context, string, adapters.ShardFn) (adapters.TableDigest, error) {
	return adapters.TableDigest{}, errors.New("not in this program")
}

type files struct{}

func (files) WriteFiles(context.Context, uint64, render.Files) error { return nil }

func main() {
	if err := run(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	os.Setenv("EMBED_ADMIN_PW", "admin-secret")
	os.Setenv("EMBED_APP_PW", "app-secret")
	os.Setenv("EMBED_COPY_PW", "copy-secret")

	// A database resharding from 2 shards to 4 on other servers, at generation 2.
	key := shardmap.Key{Column: "id", Type: shardmap.Bigint}
	rec := shardmap.NewPgHash("app", key,
		shardmap.Backend{Host: "10.0.0.1", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.2", Port: 5432, Database: "app"})
	rec.Generation = 2
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	target := shardmap.Layout{Scheme: shardmap.PgHash{Key: key, Shards: 4}}
	for i := range 4 {
		target.Shards = append(target.Shards, shardmap.Shard{Name: fmt.Sprintf("n%d", i), Fence: shardmap.FenceOpen,
			Backend: shardmap.Backend{Host: fmt.Sprintf("10.0.1.%d", i+1), Port: 5432, Database: "app"}})
	}
	rec.Target = &target
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	if _, err := st.CAS(ctx, ref, 0, rec); err != nil {
		return err
	}

	off := false
	cfg := controller.Config{
		Controller: controller.ControllerConfig{ID: "embedder", Listen: "off"},
		Databases: []controller.DatabaseConfig{{
			Name: "app", Insecure: true, AppUser: "app", AppPasswordEnv: "EMBED_APP_PW", AdminPasswordEnv: "EMBED_ADMIN_PW",
			SchemaAdmin: "loam_copy", SchemaAdminPasswordEnv: "EMBED_COPY_PW", ShardUser: "loam_admin",
			InDoubt: controller.InDoubtConfig{Enabled: &off},
			Cutover: controller.CutoverConfig{Designated: "r1"},
			Routers: []controller.RouterConfig{{ID: "r1", Admin: "unused:1"}, {ID: "r2", Admin: "unused:2"}, {ID: "r3", Admin: "unused:3"}},
		}},
	}
	fl := &fleet{gens: map[string]uint64{}}
	open := func(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
		f := controller.NewFleet()
		for _, id := range dc.RouterIDs() {
			f.Routers[id], f.Resharders[id] = router{id: id, f: fl}, router{id: id, f: fl}
		}
		f.Dial = func(context.Context, shardmap.Backend) (adapters.ShardBackend, error) { return shard{}, nil }
		f.Target = files{}
		return f, nil
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctl, err := controller.New(cfg, controller.WithStore(st), controller.WithFleets(open), controller.WithLogger(log))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()

	// ConfigPush: every router reaches the record's generation.
	for {
		fl.mu.Lock()
		n := 0
		for _, g := range fl.gens {
			if g == rec.Generation {
				n++
			}
		}
		fl.mu.Unlock()
		if n == 3 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ConfigPush never reached every router: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	var ids []string
	for id, g := range fl.gens {
		ids = append(ids, fmt.Sprintf("%s=%d", id, g))
	}
	sort.Strings(ids)
	fmt.Println("pushed:", ids)

	// The cutover plan, checked through the controller against the same fleet.
	rep, err := ctl.PlanCutover(ctx, ref, cfg.Databases[0].CutoverPlan())
	if err != nil {
		return err
	}
	for _, c := range rep.Checks {
		fmt.Printf("check %s: %s\n", c.Name, c.Status)
	}
	fmt.Println("plan ok:", rep.OK)
	req, err := ctl.Requests("embedder").StartCutover(ctx, ref, rep.Plan)
	if err != nil {
		return err
	}
	fmt.Println("cutover requested from generation", req.From)
	ctl.Drain()
	if err := <-done; err != nil {
		return err
	}
	fmt.Println("drained")
	return nil
}
