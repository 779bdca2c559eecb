package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/fencemigrate"

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
	conf := fencingConf(t, srv.Addr, `pods = ["pod-1", "pod-2"]`)
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

// TestRealFencingRoster: the fleet is the deploy system's roster, not the pods' reports. A
// roster pod that never reports (a legacy O pod) keeps B refused while every reporting pod
// runs A; a reporting pod outside the roster is counted and warned about; advance without a
// roster is refused, naming the key and the flag, and changes nothing.
func TestRealFencingRoster(t *testing.T) {
	srv := redistest.StartStandalone(t)
	ex, err := valkey.NewExecutor(srv.Client, fencing.Buzz)
	require.NoError(t, err)
	ctx := context.Background()
	conf := fencingConf(t, srv.Addr, "")
	w := newWorld()
	run := func(args ...string) (string, error) {
		return cliRun(t, w, append([]string{"--config", conf, "fencing"}, args...)...)
	}
	const roster = "pod-1,pod-2,pod-3"

	// No roster: status works and says so; advance and enable are refused before anything.
	out, err := run("status", "sessions")
	require.NoError(t, err, out)
	require.Contains(t, out, "roster: missing (set fencing.pods in loam.toml or --pods)")
	for _, cmd := range [][]string{{"advance", "sessions"}, {"enable", "sessions"}} {
		_, err = run(cmd...)
		require.ErrorIs(t, err, ErrNoRoster, cmd)
		require.ErrorContains(t, err, "fencing.pods in loam.toml or --pods")
	}
	out, err = run("status", "sessions", "--output", "json")
	require.NoError(t, err, out)
	var st fencingStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, "O", st.Allowed, "the refused advance changed nothing")
	require.Nil(t, st.Roster)
	_, err = run("advance", "sessions", "--pods", "pod-1,,pod-3")
	require.ErrorContains(t, err, "--pods: name 1 is empty")

	out, err = run("advance", "sessions", "--pods", roster)
	require.NoError(t, err, out)
	require.Contains(t, out, "may now run A")
	// pod-1 and pod-2 roll to A and report it; pod-3 never reports (it may still run O).
	for _, p := range []string{"pod-1", "pod-2"} {
		require.NoError(t, ex.Report(ctx, p, fencing.A))
	}
	_, err = run("advance", "sessions", "--pods", roster)
	var ge *fencemigrate.GateError
	require.ErrorAs(t, err, &ge, "B needs pod-3 on A")
	require.Equal(t, fencemigrate.GateFleetOnA, ge.Gate)
	require.Contains(t, ge.Detail, "pod-3=O")
	out, err = run("status", "sessions", "--pods", roster)
	require.NoError(t, err, out)
	require.Regexp(t, `pod pod-3 +O  \(no report: counted as O`, out)
	require.Contains(t, out, "roster: 3 pods (--pods)")

	// pod-3 leaves the deployment; pod-9 reports A without being in the roster: it counts.
	require.NoError(t, ex.Report(ctx, "pod-9", fencing.A))
	out, err = run("status", "sessions", "--pods", "pod-1,pod-2", "--output", "json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, []string{"pod-9"}, st.NotInRoster)
	require.Equal(t, map[string]string{"pod-1": "A", "pod-2": "A", "pod-9": "A"}, st.Pods, "pod-3 is gone, pod-9 is counted")
	require.Len(t, st.Warnings, 1)
	require.Contains(t, st.Warnings[0], "pod pod-9 reports A but is not in the roster")
	require.NoError(t, ex.Report(ctx, "pod-9", fencing.O))
	_, err = run("advance", "sessions", "--pods", "pod-1,pod-2")
	require.ErrorAs(t, err, &ge, "pod-9 runs O: B is refused though the roster runs A")
	require.Contains(t, ge.Detail, "pod-9=O")
	require.NoError(t, ex.Forget(ctx, "pod-9"))
	out, err = run("advance", "sessions", "--pods", "pod-1,pod-2")
	require.NoError(t, err, out)
	require.Contains(t, out, "may now run B")
}

// fencingConf writes a loam.toml with an embedded store and the [[fencing]] table
// "sessions" on addr, with extra keys appended to the table; it returns its path.
func fencingConf(t *testing.T, addr, extra string) string {
	dir := t.TempDir()
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`[store]
dir = %q
[[fencing]]
name = "sessions"
addrs = [%q]
lease_ttl = "300ms"
%s
`, filepath.Join(dir, "data"), addr, extra)), 0o600))
	return conf
}
