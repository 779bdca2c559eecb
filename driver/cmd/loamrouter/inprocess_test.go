package main

import (
	"context"
	"io"
	"sync"
	"testing"
)

// serveIn runs `serve --config conf` in this process on c (its fleets and store, as the
// test set them) until stop, logging to logs (nil: discarded). stop returns what serve
// returned; the test's cleanup stops it if the test did not.
func serveIn(t *testing.T, c *cli, conf string, logs io.Writer) (stop func() error) {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		root := newRootFor(c)
		root.SetArgs([]string{"--config", conf, "serve", "--log-level", "warn"})
		root.SetErr(logs)
		served <- root.ExecuteContext(ctx)
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-served })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}
