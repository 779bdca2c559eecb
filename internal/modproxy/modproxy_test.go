package modproxy_test

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"loam.dev/router/internal/modproxy"
)

// TestNestedModulesRequireTheRelease: no nested module of the checkout replaces
// loam.dev/router (an importer ignores a dependency's replace, so such a module builds
// one way here and another way, or not at all, for them); each that requires it requires
// NextRelease, the version go.work serves from this tree and the outside-module tests
// publish; go.work uses the root and every such module.
func TestNestedModulesRequireTheRelease(t *testing.T) {
	root, err := modproxy.Root()
	require.NoError(t, err)
	mods, err := modproxy.Modules(root)
	require.NoError(t, err)
	importers := []string{"."}
	for _, m := range mods {
		mf, err := modproxy.ReadGoMod(m.Dir)
		require.NoError(t, err)
		rel, _ := filepath.Rel(root, m.Dir)
		for _, r := range mf.Replace {
			require.False(t, isOurs(r.Old.Path), "%s/go.mod replaces %s: importers ignore a dependency's replace; require %s %s and let go.work serve the tree", rel, r.Old.Path, modproxy.MainModule, modproxy.NextRelease)
		}
		if m.Path == modproxy.MainModule {
			continue
		}
		for _, r := range mf.Require {
			if isOurs(r.Mod.Path) {
				require.Equal(t, modproxy.NextRelease, r.Mod.Version, "%s/go.mod requires %s at %s; the release to be tagged is %s (modproxy.NextRelease)", rel, r.Mod.Path, r.Mod.Version, modproxy.NextRelease)
				importers = append(importers, "./"+filepath.ToSlash(rel))
			}
		}
	}
	require.Contains(t, importers, "./adapters/kubernetes")

	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	wf, err := modfile.ParseWork("go.work", data, nil)
	require.NoError(t, err)
	var used []string
	for _, u := range wf.Use {
		used = append(used, u.Path)
	}
	require.ElementsMatch(t, importers, used, "go.work uses the root and each nested module that imports it")
	require.Len(t, wf.Replace, 1, "go.work's one replace")
	r := wf.Replace[0]
	require.Equal(t, modproxy.MainModule, r.Old.Path)
	require.Equal(t, modproxy.NextRelease, r.Old.Version, "go.work serves the tree as the release the nested modules require (a workspace module is not every version of itself)")
	require.Equal(t, "./", r.New.Path)
}

func isOurs(p string) bool {
	return p == modproxy.MainModule || strings.HasPrefix(p, modproxy.MainModule+"/")
}

// TestWriteServesTheTag: the served zip holds the module's tracked files under
// path@version/, and neither a nested module's files nor version control's.
func TestWriteServesTheTag(t *testing.T) {
	root, err := modproxy.Root()
	require.NoError(t, err)
	proxy := t.TempDir()
	require.NoError(t, modproxy.Write(proxy, modproxy.Module{Path: modproxy.MainModule, Dir: root, Version: modproxy.NextRelease}))
	at := filepath.Join(proxy, "loam.dev", "router", "@v")
	list, err := os.ReadFile(filepath.Join(at, "list"))
	require.NoError(t, err)
	require.Equal(t, modproxy.NextRelease+"\n", string(list))
	gomod, err := os.ReadFile(filepath.Join(at, modproxy.NextRelease+".mod"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(gomod), "module loam.dev/router\n"))
	z, err := zip.OpenReader(filepath.Join(at, modproxy.NextRelease+".zip"))
	require.NoError(t, err)
	defer z.Close()
	names := map[string]bool{}
	for _, f := range z.File {
		require.True(t, strings.HasPrefix(f.Name, "loam.dev/router@"+modproxy.NextRelease+"/"), f.Name)
		names[strings.TrimPrefix(f.Name, "loam.dev/router@"+modproxy.NextRelease+"/")] = true
	}
	require.True(t, names["go.mod"])
	require.True(t, names["internal/modproxy/modproxy.go"])
	require.False(t, names["adapters/kubernetes/go.mod"], "a nested module is not in the main module's zip")
	require.False(t, names["adapters/kubernetes/target.go"])
	for n := range names {
		require.False(t, strings.HasPrefix(n, ".git/"), n)
	}
}
