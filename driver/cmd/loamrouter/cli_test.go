package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/pghash"
)

// TestLocateExplains: locate names the shard the kernels route to, with the hash and
// remainder that decide it, and the target layout's shard during a reshard.
func TestLocateExplains(t *testing.T) {
	dir := t.TempDir()
	_, err := run(t, "--data", dir, "map", "init", "app", "--example")
	require.NoError(t, err)
	for _, key := range []string{"42", "-7", "1000000007"} {
		out, err := run(t, "--data", dir, "--output", "json", "locate", "app", "--", key)
		require.NoError(t, err)
		var got struct{ Now located }
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		v := must64(t, key)
		require.Equal(t, int(pghash.ShardOfInt8(v, 2)), got.Now.Index, "key %s", key)
		require.Contains(t, got.Now.Why, "mod 2 =")
	}
	out, err := run(t, "--data", dir, "locate", "app", "42")
	require.NoError(t, err)
	require.Contains(t, out, "why    partition hash")
	_, err = run(t, "--data", dir, "locate", "app", "forty-two")
	require.ErrorContains(t, err, "forty-two")

	// During a reshard, the target's shard too.
	rec := reshardingRecord()
	rec.Generation = 2
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	path := filepath.Join(dir, "resharding.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err = run(t, "--data", dir, "map", "init", "app2", "--file", path)
	require.ErrorContains(t, err, `router.name is "app" but the command names "app2"`)
	out, err = run(t, "--data", dir, "map", "apply", "app", "--file", path)
	require.NoError(t, err, out)
	out, err = run(t, "--data", dir, "locate", "app", "42")
	require.NoError(t, err)
	require.Contains(t, out, "after the reshard (generation 3)")
	require.Contains(t, out, "mod 4 =")
}

func must64(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}

// TestMapApplyIsCompareAndSet: apply refuses a stale --expect-version and a generation
// going backwards, names what to do, and records who applied what in the audit log.
func TestMapApplyIsCompareAndSet(t *testing.T) {
	dir := t.TempDir()
	_, err := run(t, "--data", dir, "map", "init", "app", "--example")
	require.NoError(t, err)
	rec := exampleRecord("app")
	rec.Generation = 3
	rec.Shards[1].Backend.Port = 6543
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	path := filepath.Join(dir, "g3.json")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err = run(t, "--data", dir, "map", "apply", "app", "--file", path, "--expect-version", "7")
	require.ErrorContains(t, err, "expected version 7 but the store has version 1")
	out, err := run(t, "--data", dir, "map", "apply", "app", "--file", path)
	require.NoError(t, err)
	require.Contains(t, out, "stored default/app version 2 generation 3")
	rec.Generation = 2
	data, _ = json.Marshal(rec)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	_, err = run(t, "--data", dir, "map", "apply", "app", "--file", path)
	require.ErrorContains(t, err, "goes backwards from 3 to 2")
	out, err = run(t, "--data", dir, "audit")
	require.NoError(t, err)
	require.Contains(t, out, "map apply: version 1 → 2, generation 1 → 3")
	require.Contains(t, out, "map init: version 1 generation 1")
}

// TestRenderPgDog: render prints pgdog.toml of the stored generation and keeps users.toml
// (which holds passwords) out of the terminal unless asked; --out writes both.
func TestRenderPgDog(t *testing.T) {
	t.Setenv("LOAM_TEST_APP_PW", "app-secret")
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-secret")
	dir := t.TempDir()
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte(`[store]
dir = "`+filepath.Join(dir, "data")+`"
[[databases]]
name = "app"
app_user = "app"
app_password_env = "LOAM_TEST_APP_PW"
admin_password_env = "LOAM_TEST_ADMIN_PW"
insecure = true
`), 0o600))
	_, err := run(t, "--config", conf, "map", "init", "app", "--example")
	require.NoError(t, err)
	out, err := run(t, "--config", conf, "render", "pgdog", "app")
	require.NoError(t, err)
	require.Contains(t, out, "# pgdog.toml (generation 1)")
	require.Contains(t, out, "[[databases]]")
	require.Contains(t, out, "users.toml: holds secrets")
	require.NotContains(t, out, "app-secret")
	outDir := filepath.Join(dir, "out")
	_, err = run(t, "--config", conf, "render", "pgdog", "app", "--out", outDir)
	require.NoError(t, err)
	users, err := os.ReadFile(filepath.Join(outDir, "users.toml"))
	require.NoError(t, err)
	require.Contains(t, string(users), "app-secret")
	_, err = run(t, "--config", conf, "render", "vschema", "app")
	require.ErrorContains(t, err, "routed by pgdog, not vitess (use `render pgdog`)")
	_, err = run(t, "--data", filepath.Join(dir, "data2"), "map", "init", "other", "--example")
	require.NoError(t, err)
	_, err = run(t, "--data", filepath.Join(dir, "data2"), "render", "pgdog", "other")
	require.ErrorContains(t, err, "has no [[databases]] table")
}

// TestOracleAnswersLines: the oracle command is kernel/merge's protocol on stdin/stdout.
func TestOracleAnswersLines(t *testing.T) {
	root := newRoot()
	var out strings.Builder
	root.SetIn(strings.NewReader(`{"op":"merge","order":[{"col":0}],"limit":3,"shards":[[[1],[4]],[[2],[3]]]}` + "\n"))
	root.SetOut(&out)
	root.SetArgs([]string{"oracle"})
	require.NoError(t, root.ExecuteContext(t.Context()))
	require.Contains(t, out.String(), `"rows":[[1],[2],[3]]`)
}

// TestHelpHasAnExamplePerCommand: every command a person can run shows an example.
func TestHelpHasAnExamplePerCommand(t *testing.T) {
	root := newRoot()
	var missing []string
	var visit func(path string, cmds []*cobra.Command)
	visit = func(path string, cmds []*cobra.Command) {
		for _, c := range cmds {
			p := path + " " + c.Name()
			if c.Runnable() && c.Example == "" && c.Name() != "help" && c.Name() != "completion" {
				missing = append(missing, p)
			}
			visit(p, c.Commands())
		}
	}
	visit("loamrouter", root.Commands())
	require.Empty(t, missing, "commands without an example in their help")
}
