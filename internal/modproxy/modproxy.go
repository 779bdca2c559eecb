// Package modproxy publishes this checkout's modules the way a Go module proxy serves a
// tagged release, into a directory that GOPROXY=file://<dir> reads, so that a test can
// build a module outside the tree against them with no replace directive: the test sees
// what an importer's `go get` would see.
//
// loam.dev/router has no release yet, and loam.dev serves no go-import page here, so
// nothing outside can fetch it. The nested modules that import it (adapters/kubernetes,
// conformance/vitessdiff) require NextRelease, the version it and they are to be tagged
// with at one commit (v0.1.0 and adapters/kubernetes/v0.1.0, ...); go.work at the root
// serves that version from this tree for local development and CI.
package modproxy

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// MainModule is the module at the root of the checkout.
const MainModule = "loam.dev/router"

// NextRelease is the version of loam.dev/router (and of each nested module) that the
// nested modules require: the next tag. Bump it here, in every nested go.mod and in the
// go.work replace together (TestNestedModulesRequireTheRelease holds them to it).
const NextRelease = "v0.1.0"

// Module is one module of the checkout: its path, the directory of its go.mod, and the
// version to serve it at.
type Module struct {
	Path, Dir, Version string
}

// Root is the top of the git checkout holding the current directory.
func Root() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the checkout's root (git rev-parse): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Modules lists the modules of the checkout at root: the main module and every nested
// module git tracks (or would track), each at NextRelease.
func Modules(root string) ([]Module, error) {
	files, err := gitFiles(root)
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, f := range files {
		if path.Base(f) != "go.mod" {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(path.Dir(f)))
		mf, err := ReadGoMod(dir)
		if err != nil {
			return nil, err
		}
		mods = append(mods, Module{Path: mf.Module.Mod.Path, Dir: dir, Version: NextRelease})
	}
	return mods, nil
}

// ReadGoMod parses the go.mod in dir.
func ReadGoMod(dir string) (*modfile.File, error) {
	p := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	mf, err := modfile.Parse(p, data, nil)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", p, err)
	}
	if mf.Module == nil {
		return nil, fmt.Errorf("%s has no module line", p)
	}
	return mf, nil
}

// Write lays out each module in proxy as the module proxy protocol has it
// (<escaped path>/@v/list, <version>.info, .mod, .zip). A module's zip holds the files of
// its directory that git tracks or would track (a tag's content, plus this checkout's
// edits), less nested modules, as golang.org/x/mod/zip builds it for the go command.
func Write(proxy string, mods ...Module) error {
	for _, m := range mods {
		if err := write(proxy, m); err != nil {
			return fmt.Errorf("serving %s@%s from %s: %w", m.Path, m.Version, m.Dir, err)
		}
	}
	return nil
}

func write(proxy string, m Module) error {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	ver, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
	if err != nil {
		return err
	}
	names, err := gitFiles(m.Dir)
	if err != nil {
		return err
	}
	var files []zip.File
	for _, n := range names {
		if fi, err := os.Lstat(filepath.Join(m.Dir, filepath.FromSlash(n))); err == nil && fi.Mode().IsRegular() { // a file deleted in the checkout is not in its tag
			files = append(files, dirFile{slash: n, abs: filepath.Join(m.Dir, filepath.FromSlash(n)), info: fi})
		}
	}
	var z bytes.Buffer
	if err := zip.Create(&z, module.Version{Path: m.Path, Version: m.Version}, files); err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"list":        []byte(m.Version + "\n"),
		ver + ".info": fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, m.Version),
		ver + ".mod":  gomod,
		ver + ".zip":  z.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gitFiles lists the files under dir that git tracks or would track (not ignored),
// relative to dir, slash-separated.
func gitFiles(dir string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s (a module is served from a git checkout): %w: %s", dir, err, stderr.String())
	}
	var files []string
	seen := map[string]bool{}
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" && !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	return files, nil
}

type dirFile struct {
	slash, abs string
	info       os.FileInfo
}

func (f dirFile) Path() string                 { return f.slash }
func (f dirFile) Lstat() (os.FileInfo, error)  { return f.info, nil }
func (f dirFile) Open() (io.ReadCloser, error) { return os.Open(f.abs) }
