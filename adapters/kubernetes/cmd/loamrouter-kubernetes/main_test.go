package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
)

// TestRunRefusesBeforeServing: what the daemon cannot run is refused before it opens the
// store or serves, naming the flag or the key: a command word (the commands are
// loamrouter's), a bad log format, a config mistake, a kubeconfig that does not exist.
func TestRunRefusesBeforeServing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var stderr bytes.Buffer
	require.ErrorContains(t, run(ctx, []string{"serve"}, &stderr), `unexpected argument "serve"`)
	require.ErrorContains(t, run(ctx, []string{"--log-format", "xml"}, &stderr), `log format "xml"`)

	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\n"), 0o600))
	err := run(ctx, []string{"--config", bad}, &stderr)
	require.ErrorIs(t, err, controller.ErrConfig)
	require.ErrorContains(t, err, "databases[0].target.secret")

	good := filepath.Join(dir, "loam.toml")
	store := filepath.Join(dir, "store")
	require.NoError(t, os.WriteFile(good, []byte("[store]\ndir = \""+store+"\"\n[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"pgdog-users\"\n"), 0o600))
	err = run(ctx, []string{"--config", good, "--kubeconfig", filepath.Join(dir, "missing")}, &stderr)
	require.ErrorContains(t, err, "--kubeconfig")
	_, err = os.Stat(store)
	require.ErrorIs(t, err, os.ErrNotExist, "the store is not opened before the API server is known")
}
