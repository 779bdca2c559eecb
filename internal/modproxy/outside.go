package modproxy

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Outside is a scratch module in a directory outside the checkout whose go commands
// resolve loam.dev/router's modules only through a file:// proxy of the checkout (Write),
// as an importer's would through the module proxy: no go.work, no replace, -mod=mod so
// that go adds what the served go.mod files require, the checksum database skipped for
// loam.dev only. Every other module comes from the machine's module cache (used as a
// proxy) or else the machine's GOPROXY, into a module cache of the outside module's own
// (under the user's cache directory, one per name, held under a file lock while in use),
// so that no copy of this checkout at NextRelease reaches the machine's cache. That cache
// stays at one path from run to run, so the go build cache keeps what was compiled from it
// (client-go, ...); its loam.dev modules are removed before each use, so a run never
// builds against an earlier run's checkout.
type Outside struct {
	Dir string   // the scratch module
	Env []string // the environment its go commands run in
	// ModCache is its module cache (GOMODCACHE).
	ModCache string

	lock *os.File
}

// Close releases the outside module's cache for the next run.
func (o *Outside) Close() error {
	if o.lock == nil {
		return nil
	}
	defer o.lock.Close()
	return syscall.Flock(int(o.lock.Fd()), syscall.LOCK_UN)
}

// lockCache takes (waiting for it) the module cache called name under the user's cache
// directory and removes loam.dev's modules from it.
func lockCache(name string) (dir string, lock *os.File, err error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", nil, fmt.Errorf("the outside module's cache: %w", err)
	}
	dir = filepath.Join(base, "loam", "outside-modcache", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	lock, err = os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return "", nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	for _, d := range []string{filepath.Join(dir, "loam.dev"), filepath.Join(dir, "cache", "download", "loam.dev")} {
		if err := os.RemoveAll(d); err != nil {
			lock.Close()
			return "", nil, fmt.Errorf("removing an earlier run's copy of this checkout: %w", err)
		}
	}
	return dir, lock, nil
}

// NewOutside serves the modules of the checkout at root from tmp/proxy and writes the
// scratch module into tmp/outside: a go.mod of module example.com/outside requiring
// require (module paths, each at NextRelease), a go.sum seeded from the served modules'
// go.sum files (so go asks the checksum database only for what they do not pin), and
// files (name → content). Its module cache is the one called cacheName, which Close
// releases.
func NewOutside(root, tmp, cacheName string, require []string, files map[string]string) (*Outside, error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	proxy := filepath.Join(tmp, "proxy")
	if err := Write(proxy, mods...); err != nil {
		return nil, err
	}
	o := &Outside{Dir: filepath.Join(tmp, "outside")}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	gomod := "module example.com/outside\n\ngo 1.26\n"
	for _, r := range require {
		gomod += "\nrequire " + r + " " + NextRelease + "\n"
	}
	var sum []string
	seen := map[string]bool{}
	for _, m := range mods {
		data, err := os.ReadFile(filepath.Join(m.Dir, "go.sum"))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, l := range strings.SplitAfter(string(data), "\n") {
			if strings.TrimSpace(l) != "" && !seen[l] {
				seen[l] = true
				sum = append(sum, l)
			}
		}
	}
	files = maps.Clone(files)
	if files == nil {
		files = map[string]string{}
	}
	files["go.mod"], files["go.sum"] = gomod, strings.Join(sum, "")
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(o.Dir, name), []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	goenv, err := exec.Command("go", "env", "GOPROXY", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	goproxy, machineCache, _ := strings.Cut(strings.TrimSpace(string(goenv)), "\n")
	modcache, lock, err := lockCache(cacheName)
	if err != nil {
		return nil, err
	}
	o.lock, o.ModCache = lock, modcache
	// A build cache of its own too, kept beside the module cache (warm from one run to the
	// next, under the same lock): the machine's shared one, filled by `go test -race ./...`
	// at the same time, once held an entry whose export data was gone, and every outside
	// build then failed with "could not import time (open : no such file or directory)"
	// (CI, 2026-12-03) while a fresh cache built it.
	gocache := filepath.Join(filepath.Dir(modcache), "..", "outside-gocache", cacheName)
	o.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod -modcacherw", "GONOSUMDB=loam.dev", "GOTOOLCHAIN=local",
		"GOMODCACHE="+modcache, "GOCACHE="+filepath.Clean(gocache),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(machineCache, "cache", "download"))+","+goproxy)
	return o, nil
}

// Go runs the go command with args in the scratch module, returning its combined output.
func (o *Outside) Go(ctx context.Context, args ...string) (string, error) {
	out, err := o.run(ctx, args)
	if err != nil {
		return string(out), fmt.Errorf("go %s in the outside module: %w:\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// run runs the go command once.
func (o *Outside) run(ctx context.Context, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = o.Dir, o.Env
	return cmd.CombinedOutput()
}
