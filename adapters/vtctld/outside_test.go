package vtctld_test

import (
	"archive/zip"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOutsideModuleRequiresNoVitess: a module outside this tree that requires
// loam.dev/router, as published, and imports this package builds with no replace
// directive, and has no Vitess module in its build. loam.dev/router is not published, so the
// test publishes this tree as a module proxy would serve it (a file:// proxy in front of the
// machine's GOPROXY, holding this tree's module zip at a made-up version) and builds a
// scratch module against it with GOFLAGS=-mod=mod.
func TestOutsideModuleRequiresNoVitess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	const version = "v0.0.0-20260101000000-000000000000"
	proxy := t.TempDir()
	at := filepath.Join(proxy, "loam.dev", "router", "@v")
	require.NoError(t, os.MkdirAll(at, 0o755))
	modFile, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(at, version+".info"), []byte(`{"Version":"`+version+`","Time":"2026-01-01T00:00:00Z"}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(at, version+".mod"), modFile, 0o644))
	moduleZip(t, root, "loam.dev/router@"+version, filepath.Join(at, version+".zip"))

	scratch := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "go.mod"), []byte("module example.com/outside\n\ngo 1.26\n\nrequire loam.dev/router "+version+"\n"), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum")) // the same dependencies: no checksum lookups for them
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "main.go"), []byte(`package main

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
`), 0o644))
	goenv, err := exec.Command("go", "env", "GOPROXY", "GOMODCACHE").Output()
	require.NoError(t, err)
	goproxy, modcache, _ := strings.Cut(strings.TrimSpace(string(goenv)), "\n")
	// A module cache of its own, so that no copy of this tree stays in the machine's (a
	// later run would build against it); it is filled from the machine's cache, used as a
	// proxy, before the machine's GOPROXY.
	cache := t.TempDir()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GONOSUMDB=loam.dev", "GOMODCACHE="+cache,
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(modcache, "cache", "download"))+","+goproxy)
	t.Cleanup(func() { // module cache files are read-only
		cmd := exec.Command("go", "clean", "-modcache")
		cmd.Env = env
		cmd.Run()
	})
	gocmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = scratch, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	gocmd("build", "-o", filepath.Join(scratch, "outside"), ".")
	out, err := exec.Command(filepath.Join(scratch, "outside")).CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(out), "Config.Addr is empty")
	mods := gocmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
	require.Contains(t, mods, "loam.dev/router")
	require.NotContains(t, mods, "vitess.io", "an importer builds no Vitess code")
	require.NotContains(t, gocmd("mod", "graph"), "vitess.io", "nor has Vitess in its module graph")
}

// moduleZip writes the module zip of the module at root, as the module proxy serves it:
// every file under prefix/, leaving out nested modules and version control.
func moduleZip(t *testing.T, root, prefix, out string) {
	t.Helper()
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if d.Name() == ".git" || rel != "." && fileExists(filepath.Join(p, "go.mod")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		w, err := zw.Create(prefix + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	})
	require.NoError(t, err)
	require.NoError(t, zw.Close())
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
