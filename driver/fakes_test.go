package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
)

// fakeTarget is an in-memory ConfigTarget with the generation check a ConfigMap keeps in
// its annotation.
type fakeTarget struct {
	mu     sync.Mutex
	gen    uint64
	writes int
}

func (f *fakeTarget) WriteFiles(ctx context.Context, gen uint64, files render.Files) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if gen < f.gen {
		return &adapters.GenerationError{Target: "fake", Have: f.gen, Want: gen}
	}
	f.gen = gen
	return nil
}

// fakeInstance is an in-memory router instance. Each call takes latency (cut short by ctx);
// while hold is set, Apply waits for ctx to end; failApply fails that many Apply calls. An
// Apply whose ctx ended has no effect, as a RELOAD that never reached PgDog.
type fakeInstance struct {
	id        string
	latency   time.Duration
	mu        sync.Mutex
	hold      bool
	held      chan string // told when an Apply starts waiting under hold
	failApply int
	gen       uint64
	applied   int // Apply calls that took effect
	calls     int // Apply calls, effective or not
}

func (f *fakeInstance) ID() string { return f.id }

func (f *fakeInstance) wait(ctx context.Context) error {
	if f.latency == 0 {
		return ctx.Err()
	}
	t := time.NewTimer(f.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeInstance) Apply(ctx context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	f.mu.Lock()
	f.calls++
	hold, fail := f.hold, f.failApply > 0
	if fail {
		f.failApply--
	}
	f.mu.Unlock()
	if hold {
		f.held <- f.id
		<-ctx.Done()
	}
	if err := f.wait(ctx); err != nil {
		return adapters.Applied{}, err
	}
	if fail {
		return adapters.Applied{}, &adapters.RouterError{Instance: f.id, Op: "Apply", Code: "58000", Err: errors.New("config error")}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen = gen
	f.applied++
	return adapters.Applied{Generation: gen}, nil
}

func (f *fakeInstance) Observe(ctx context.Context) (adapters.Observed, error) {
	if err := f.wait(ctx); err != nil {
		return adapters.Observed{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return adapters.Observed{Generation: f.gen, GenerationKnown: true}, nil
}

func (f *fakeInstance) Pause(context.Context, string) error  { return errors.New("not used") }
func (f *fakeInstance) Resume(context.Context, string) error { return errors.New("not used") }

func fakeInstances(n int, latency time.Duration) (map[string]adapters.RouterInstance, []*fakeInstance, []string) {
	m := map[string]adapters.RouterInstance{}
	var fs []*fakeInstance
	var ids []string
	for i := range n {
		f := &fakeInstance{id: fmt.Sprintf("pgdog-%d", i), latency: latency, held: make(chan string, 1)}
		m[f.id] = f
		fs = append(fs, f)
		ids = append(ids, f.id)
	}
	return m, fs, ids
}
