package main

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

// serveIn runs `serve --config conf` in this process on c (its fleets and store, as the
// test set them) until stop, logging to logs (nil: discarded). It returns once the daemon
// accepts connections on controller.listen; a daemon that ends before that (it could not
// open its store, its config is refused) fails the test at once with serve's error, and
// one that ends by itself later fails it too. stop returns what serve returned; the test's
// cleanup stops it if the test did not.
func serveIn(t *testing.T, c *cli, conf string, logs io.Writer) (stop func() error) {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	listen := listenOf(t, conf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}) // closed when serve returned, its error in served
	var served error
	go func() {
		defer close(done)
		root := newRootFor(c)
		root.SetArgs([]string{"--config", conf, "serve", "--log-level", "warn"})
		root.SetErr(logs)
		served = root.ExecuteContext(ctx)
	}()
	var stopping atomic.Bool
	watched := make(chan struct{}) // closed when the watcher is done with t
	go func() {
		defer close(watched)
		<-done
		if !stopping.Load() {
			t.Errorf("serve --config %s ended by itself, before the test stopped it: %v", conf, served)
		}
	}()
	var once sync.Once
	stop = func() error {
		once.Do(func() { stopping.Store(true); cancel(); <-done; <-watched })
		return served
	}
	t.Cleanup(func() { _ = stop() })

	deadline := time.Now().Add(60 * time.Second)
	for listen != "" && listen != "off" && !accepts(listen) {
		select {
		case <-done:
			<-watched // it said why
			t.FailNow()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve --config %s not accepting connections on %s after 60s", conf, listen)
		}
	}
	return stop
}

// listenOf is the controller.listen of a config file ("" when unset).
func listenOf(t *testing.T, conf string) string {
	t.Helper()
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Controller struct {
			Listen string `toml:"listen"`
		} `toml:"controller"`
	}
	if err := toml.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", conf, err)
	}
	return c.Controller.Listen
}

// accepts tells whether something accepts connections on a listen address ("host:port" or
// "unix:path").
func accepts(listen string) bool {
	network, addr := "tcp", listen
	if p, ok := strings.CutPrefix(listen, "unix:"); ok {
		network, addr = "unix", p
	}
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
