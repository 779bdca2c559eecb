package controller_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goTool is the go command of the toolchain running the test.
func goTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no go command beside the toolchain (%v)", err)
	}
	return bin
}

// TestDepsHoldNoSimulatorNorTestHelpers: what an embedder links is the machines, the
// driver and the adapters: no deterministic simulator, no conformance helper (the tests'
// throwaway-server launchers), not what loamrouter's demo runs (the reference router, the
// Postgres launcher), nothing that imports testing.
func TestDepsHoldNoSimulatorNorTestHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool(t), "list", "-deps", "loam.dev/router/controller").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "loam.dev/router/driver", "the list is the controller's dependencies")
	for _, d := range deps {
		require.NotContains(t, d, "detsim", "the controller links the simulator through %s", d)
		require.False(t, strings.HasPrefix(d, "loam.dev/router/conformance"), "the controller links the test helper %s", d)
		require.False(t, strings.HasPrefix(d, "loam.dev/") && strings.HasSuffix(d, "test"), "the controller links %s, a test helper by its name", d)
		require.NotEqual(t, "testing", d, "a dependency of the controller imports testing")
		require.NotContains(t, []string{"loam.dev/router/refrouter", "loam.dev/router/pglaunch"}, d, "the controller links the demo's %s", d)
	}
}

// TestAnExternalModuleEmbedsTheController: a module of someone else's, built from
// scratch with a replace to this checkout and no network, embeds a controller with its
// own store, routers and shards: a ConfigPush brings every router to the record's
// generation, the cutover plan passes through the controller, the request is stored, and
// the controller drains.
func TestAnExternalModuleEmbedsTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module (-short)")
	}
	goBin := goTool(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "embed", "main.go"))
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err, "the scratch module builds offline on this module's checksums")
	mod := "module example.com/embedder\n\ngo 1.26.0\n\nrequire loam.dev/router v0.0.0-00010101000000-000000000000\n\nreplace loam.dev/router => " + root + "\n"
	for name, data := range map[string][]byte{"main.go": src, "go.sum": sum, "go.mod": []byte(mod)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", ".")
	cmd.Dir = dir
	// -mod=mod lets go add the requirements the replaced module brings (from the module
	// cache, offline: GOPROXY=off); whatever GOFLAGS the caller set (-mod=vendor,
	// -mod=readonly) is not for this module.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the external module:\n%s", out)
	got := string(out)
	require.Contains(t, got, "pushed: [r1=2 r2=2 r3=2]", "ConfigPush reached every router")
	for _, c := range []string{"start request", "instance r1", "instance r2", "instance r3", "designated resharder", "rollback: files target", "controller"} {
		require.Contains(t, got, "check "+c+": ok", "the plan's check %q", c)
	}
	require.Contains(t, got, "plan ok: true")
	require.Contains(t, got, "cutover requested from generation 2")
	require.Contains(t, got, "drained")
}
