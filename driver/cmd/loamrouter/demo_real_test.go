package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRealDemo runs `loamrouter demo` to its report on real Postgres: the fenced cutover
// moves app from 2 to 3 shards under load with one router cut off from the controller, the
// fence refuses that router's writes, no acknowledged write is lost, and everything the
// demo started is gone afterwards.
func TestRealDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres servers; not in -short")
	}
	var out strings.Builder
	report := filepath.Join(t.TempDir(), "demo.html")
	r, err := runDemo(t.Context(), &out, demoOptions{noInstall: true, steady: time.Second, workers: 4, report: report})
	if errors.Is(err, errNoPostgres) {
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatalf("LOAM_REQUIRE_REAL=1 but %v", err)
		}
		t.Skip(err.Error())
	}
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())
	require.Equal(t, "finalized", r.Outcome)
	require.Zero(t, r.Lost, "acknowledged writes lost")
	require.Zero(t, r.Failed, "writes failed other than by the fence or the end of the load")
	require.NotZero(t, r.Fenced, "the stale router's writes are refused by the fence")
	require.NotZero(t, r.Acked)
	require.Greater(t, r.PauseWindow, time.Duration(0))
	require.Contains(t, r.PgDogToml, `database_name = "app_n2"`, "the new generation routes to the three new shards")
	require.Contains(t, out.String(), "pushed: Outcome gen=4 confirmed=(ref-1,ref-2,ref-3)")
	page, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(page), "<svg")
	requireCleanedUp(t, out.String())
}

// requireCleanedUp: the demo's directory is gone and its Postgres servers no longer listen.
func requireCleanedUp(t *testing.T, out string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "loam-demo-*"))
	for _, d := range left {
		require.NotContains(t, out, d, "the demo's directory %s was left behind", d)
	}
	dirs := regexp.MustCompile(`on 127\.0\.0\.1:\d+ \(([^)]+)\)`).FindAllStringSubmatch(out, -1)
	require.Len(t, dirs, 2, "the narration names both servers' data directories:\n%s", out)
	for _, d := range dirs {
		require.NoDirExists(t, d[1], "a server's data directory was left behind")
	}
	ports := regexp.MustCompile(`on 127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(out, -1)
	require.NotEmpty(t, ports, out)
	for _, p := range ports {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+p[1], time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("a demo server still listens on port %s", p[1])
		}
	}
}

// signalWriter cancels when the narration reaches a line.
type signalWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	when   string
	cancel func()
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if w.cancel != nil && strings.Contains(w.b.String(), w.when) {
		w.cancel()
		w.cancel = nil
	}
	return n, err
}

// TestRealDemoInterrupted: Ctrl-C in the middle of the cutover's copy stops the demo, and
// it still removes everything it started.
func TestRealDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres servers; not in -short")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &signalWriter{when: "[▶······] copy", cancel: cancel}
	_, err := runDemo(ctx, w, demoOptions{noInstall: true, steady: time.Second, workers: 2})
	if errors.Is(err, errNoPostgres) {
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatalf("LOAM_REQUIRE_REAL=1 but %v", err)
		}
		t.Skip(err.Error())
	}
	require.ErrorIs(t, err, context.Canceled)
	requireCleanedUp(t, w.b.String())
}
