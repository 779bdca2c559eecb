package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func TestMapInitShowRoundTrip(t *testing.T) {
	dir := t.TempDir()
	out, err := run(t, "--data", dir, "map", "init", "app", "--example")
	require.NoError(t, err)
	require.Contains(t, out, "created default/app version 1 generation 1")
	out, err = run(t, "--data", dir, "map", "show", "app")
	require.NoError(t, err)
	require.Contains(t, out, `"customer_id"`)

	// The shown JSON is accepted back by validate.
	path := filepath.Join(dir, "app.json")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o600))
	out, err = run(t, "map", "validate", "--file", path)
	require.NoError(t, err)
	require.Contains(t, out, "ok: pgdog \"app\", 2 shards")

	_, err = run(t, "--data", dir, "map", "init", "app", "--example")
	require.ErrorContains(t, err, "use `map apply`")
}

func TestMapValidateNamesTheField(t *testing.T) {
	var rec map[string]any
	require.NoError(t, json.Unmarshal(must(json.Marshal(exampleRecord("app"))), &rec))
	rec["shards"].([]any)[1].(map[string]any)["name"] = "s0"
	path := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(path, must(json.Marshal(rec)), 0o600))
	_, err := run(t, "map", "validate", "--file", path)
	require.ErrorContains(t, err, `shards[1].name: "s0" is used twice`)
	require.True(t, strings.HasPrefix(err.Error(), path), "the error names the file")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
