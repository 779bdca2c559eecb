package kubernetes_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/internal/modproxy"
)

// outsideMain is the outside module's program: a Target from this module and a vtctld
// client from the main module, each refusing a configuration it is not given.
const outsideMain = `package main

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"loam.dev/router/adapters"
	k8starget "loam.dev/router/adapters/kubernetes"
	"loam.dev/router/adapters/vtctld"
)

func main() {
	var _ adapters.ConfigTarget = (*k8starget.Target)(nil)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		panic(err)
	}
	_, err = k8starget.NewTarget(c, k8starget.TargetOptions{Namespace: "loam"})
	fmt.Println(err)
	_, err = vtctld.Dial(vtctld.Config{})
	fmt.Println(err)
}
`

// TestOutsideModuleImportsWithoutReplace: a module outside this tree requires
// loam.dev/router/adapters/kubernetes at the release its go.mod is to be tagged with, and
// every package its program imports resolves with no replace and no go.work, loam.dev/router
// and this module through a module proxy (with LOAM_OUTSIDE_BUILD=1 the program is also
// built and run): loam.dev serves nothing here, so the test serves the checkout's
// modules at modproxy.NextRelease from a file:// proxy (as a tag would be served), in front
// of the machine's module cache and GOPROXY for everything else (modproxy.Outside). It fails if this module's
// go.mod requires a version of loam.dev/router that is not the release (the proxy serves
// no other), or carries a replace of it (which an importer would ignore).
//
//	cd adapters/kubernetes && go test -run TestOutsideModuleImportsWithoutReplace -count=1 -v .
//	cd adapters/kubernetes && LOAM_OUTSIDE_BUILD=1 go test -run TestOutsideModuleImportsWithoutReplace -count=1 -v .
func TestOutsideModuleImportsWithoutReplace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (-short)")
	}
	root, err := modproxy.Root()
	require.NoError(t, err)
	self, err := modproxy.ReadGoMod(filepath.Join(root, "adapters", "kubernetes"))
	require.NoError(t, err)
	for _, r := range self.Replace {
		require.NotEqual(t, modproxy.MainModule, r.Old.Path, "adapters/kubernetes/go.mod replaces loam.dev/router: its importers ignore that, so they would build it against another tree")
	}
	tmp := t.TempDir()
	o, err := modproxy.NewOutside(root, tmp, "kubernetes", []string{"loam.dev/router/adapters/kubernetes"}, map[string]string{"main.go": outsideMain})
	require.NoError(t, err)
	defer o.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()

	// Every package the program imports, resolved through the proxy with nothing missing.
	deps, err := o.Go(ctx, "list", "-e", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}@{{.Version}}{{end}} {{with .Error}}ERROR {{.}}{{end}}", ".")
	require.NoError(t, err)
	require.NotContains(t, deps, "ERROR", "a package the outside module imports does not resolve")
	for _, p := range []string{"loam.dev/router/adapters/kubernetes loam.dev/router/adapters/kubernetes@" + modproxy.NextRelease,
		"loam.dev/router/controller loam.dev/router@" + modproxy.NextRelease, "loam.dev/router/adapters/vtctld loam.dev/router@" + modproxy.NextRelease,
		"k8s.io/client-go/kubernetes k8s.io/client-go@"} {
		require.Contains(t, deps, p)
	}
	if os.Getenv("LOAM_OUTSIDE_BUILD") == "1" {
		// Compiling client-go from a module cache of its own takes minutes on a loaded
		// machine (the build cache keeps it for the next run, as the cache stays at one
		// path), so by default the test stops at the resolution above.
		bin := filepath.Join(tmp, "outside-bin")
		_, err = o.Go(ctx, "build", "-trimpath", "-o", bin, ".")
		require.NoError(t, err)
		out, err := exec.CommandContext(ctx, bin).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "TargetOptions.ConfigMap is empty", "the Target of the served module")
		require.Contains(t, string(out), "Config.Addr is empty", "the vtctld client of the served main module")
	}

	// Where each of loam.dev/router's modules came from: the proxy's release, unpacked into
	// the outside module's own cache, never this checkout.
	mods, err := o.Go(ctx, "list", "-m", "-f", "{{.Path}} {{.Version}} {{.Dir}} {{.Replace}}", "loam.dev/router", "loam.dev/router/adapters/kubernetes")
	require.NoError(t, err)
	for _, l := range strings.Split(strings.TrimSpace(mods), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 4, l)
		require.Equal(t, modproxy.NextRelease, f[1], l)
		require.True(t, strings.HasPrefix(f[2], o.ModCache+string(filepath.Separator)), "%s comes from the outside module's cache, not the checkout", l)
		require.Equal(t, "<nil>", f[3], "no replace: %s", l)
	}
}
