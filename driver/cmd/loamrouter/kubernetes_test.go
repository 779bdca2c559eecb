package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
)

// TestServeRefusesTheKubernetesTarget: loamrouter links no client-go, so a database whose
// files go to a ConfigMap is refused at start, naming the key and the binary that runs it,
// instead of a daemon that pushes nowhere.
func TestServeRefusesTheKubernetesTarget(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte("[controller]\nlisten = \"off\"\n[store]\ndir = \""+filepath.Join(dir, "data")+"\"\n"+
		"[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"pgdog-users\"\n"), 0o600))
	_, err := run(t, "--config", conf, "serve")
	require.ErrorIs(t, err, controller.ErrConfig)
	require.ErrorContains(t, err, "databases[0].target.kind: kind kubernetes is run by the loamrouter-kubernetes binary")
}
