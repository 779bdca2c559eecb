package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// TestRealFencingMigration walks a directory on a real Redis through the whole migration
// with the CLI, one request at a time: every skipped gate is refused by name; the backfill
// runs once; C waits the drain out; the door asks for its token and opens only with it.
func TestRealFencingMigration(t *testing.T) {
	srv := redistest.StartStandalone(t)
	ex, err := valkey.NewExecutor(srv.Client, fencing.Buzz)
	require.NoError(t, err)
	ctx := context.Background()
	report := func(v fencing.Version) {
		for _, p := range []string{"pod-1", "pod-2"} {
			require.NoError(t, ex.Report(ctx, p, v))
		}
	}
	report(fencing.O)
	dir := t.TempDir()
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`[store]
dir = %q
[[fencing]]
name = "sessions"
addrs = [%q]
lease_ttl = "300ms"
`, filepath.Join(dir, "data"), srv.Addr)), 0o600))
	w := newWorld()
	run := func(args ...string) (string, error) {
		return cliRun(t, w, append([]string{"--config", conf, "fencing"}, args...)...)
	}

	out, err := run("status", "sessions")
	require.NoError(t, err)
	require.Contains(t, out, "allowed O")
	require.Contains(t, out, "pod pod-1")
	_, err = run("advance", "sessions", "--to", "B")
	require.ErrorContains(t, err, "two-adjacent-versions")
	out, err = run("advance", "sessions")
	require.NoError(t, err, out)
	require.Contains(t, out, "may now run A")
	_, err = run("advance", "sessions")
	require.Error(t, err, "B needs every pod on A")
	report(fencing.A)
	_, err = run("advance", "sessions")
	require.NoError(t, err)
	report(fencing.B)
	_, err = run("advance", "sessions", "--to", "C")
	require.ErrorContains(t, err, "backfill")
	out, err = run("advance", "sessions", "--backfill")
	require.NoError(t, err, out)
	require.Contains(t, out, "backfill backfill/")
	require.Contains(t, out, "drain wait")
	require.Contains(t, out, "0 live old-key leases")
	_, err = run("advance", "sessions", "--backfill")
	require.Error(t, err, "the backfill runs once")
	out, err = run("advance", "sessions")
	require.NoError(t, err, out)
	require.Contains(t, out, "may now run C")
	report(fencing.C)
	out, err = run("enable", "sessions")
	require.NoError(t, err, out)
	m := regexp.MustCompile(`--confirm (\S+)`).FindStringSubmatch(out)
	require.Len(t, m, 2, out)
	_, err = run("enable", "sessions", "--confirm", "not-the-token")
	require.Error(t, err)
	out, err = run("enable", "sessions", "--confirm", m[1])
	require.NoError(t, err, out)
	require.Contains(t, out, "cluster mode enabled")
	out, err = run("status", "sessions")
	require.NoError(t, err)
	require.Contains(t, out, "cluster mode true")
	_, err = run("advance", "sessions")
	require.Error(t, err, "nothing after the door")
}
