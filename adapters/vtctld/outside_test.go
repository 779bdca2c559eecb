package vtctld_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/internal/modproxy"
)

// TestOutsideModuleRequiresNoVitess: a module outside this tree that requires
// loam.dev/router at its release and imports this package builds with no replace
// directive, and has no Vitess module in its build. loam.dev/router is not published, so the
// test publishes this tree as a module proxy would serve the release (a file:// proxy in
// front of the machine's module cache and GOPROXY; internal/modproxy) and builds a scratch
// module against it with GOFLAGS=-mod=mod.
func TestOutsideModuleRequiresNoVitess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	root, err := modproxy.Root()
	require.NoError(t, err)
	tmp := t.TempDir()
	o, err := modproxy.NewOutside(root, tmp, "vtctld", []string{modproxy.MainModule}, map[string]string{"main.go": `package main

import (
	"fmt"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
)

func main() {
	var _ adapters.VitessControl = (*vtctld.Client)(nil)
	_, err := vtctld.Dial(vtctld.Config{})
	fmt.Println(err)
}
`})
	require.NoError(t, err)
	defer o.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	gocmd := func(args ...string) string {
		out, err := o.Go(ctx, args...)
		require.NoError(t, err)
		return out
	}
	bin := filepath.Join(tmp, "outside-bin")
	gocmd("build", "-trimpath", "-o", bin, ".")
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(out), "Config.Addr is empty")
	mods := gocmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
	require.Contains(t, mods, "loam.dev/router")
	require.NotContains(t, mods, "vitess.io", "an importer builds no Vitess code")
	require.NotContains(t, gocmd("mod", "graph"), "vitess.io", "nor has Vitess in its module graph")
}
