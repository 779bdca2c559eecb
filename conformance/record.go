package conformance

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Outcome is what one case did under Record: whether it failed, and its messages.
type Outcome struct {
	Failed bool
	Msgs   []string
}

// Record runs f with a TB that records failures instead of failing a test, in a goroutine
// of its own (FailNow ends it as it ends a test), then runs f's cleanups. Mutant tests use
// it to show that a case fails against a deliberately broken implementation.
func Record(ctx context.Context, name string, f func(t TB)) Outcome {
	ctx, cancel := context.WithCancel(ctx)
	tb := &recordTB{name: name, ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	cancel()
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	return Outcome{Failed: tb.failed, Msgs: tb.msgs}
}

type recordTB struct {
	mu       sync.Mutex
	name     string
	ctx      context.Context
	failed   bool
	msgs     []string
	cleanups []func()
}

func (r *recordTB) Helper()                  {}
func (r *recordTB) Name() string             { return r.name }
func (r *recordTB) Context() context.Context { return r.ctx }
func (r *recordTB) Cleanup(f func())         { r.mu.Lock(); r.cleanups = append(r.cleanups, f); r.mu.Unlock() }
func (r *recordTB) Errorf(f string, a ...any) {
	r.mu.Lock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(f, a...))
	r.mu.Unlock()
}
func (r *recordTB) Fatalf(f string, a ...any) { r.Errorf(f, a...); runtime.Goexit() }
func (r *recordTB) FailNow()                  { r.mu.Lock(); r.failed = true; r.mu.Unlock(); runtime.Goexit() }
