package configmap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
)

// The layout's own names; every one begins with "..", which rendered files may not.
const (
	dataLink   = "..data"       // symlink to the current generation's directory
	marker     = "..generation" // in a generation's directory: its generation in decimal
	lockName   = "..lock"       // flock(2)ed by a writer, across processes
	genPrefix  = "..g"          // generation directories: ..g<20-digit generation>.<random>
	tempPrefix = "..tmp."       // symlinks being put in place by rename
)

// errDifferentFiles: the directory holds the generation asked for, with other files (the
// same record rendered with other credentials): WriteFiles replaces them.
var errDifferentFiles = errors.New("configmap: the generation is written with other files")

// Dir writes rendered files into a directory (see the package doc for its layout). It is
// safe for concurrent use, and writers in other processes are kept out by a lock file.
type Dir struct {
	path string
	mu   sync.Mutex
}

var _ adapters.ConfigTarget = (*Dir)(nil)

// The one mode of the routers' files wherever they are written (a target directory, or
// `loamrouter render --out`): users.toml carries every password, so the files are the
// owner's alone, in directories only the owner can enter. A router instance reads them as
// the user that writes them (or through a ConfigMap mount, whose own mode applies).
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// NewDir returns the target for path, creating the directory if it does not exist.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("configmap: no directory given (name the directory the router instances read their files from)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("configmap: directory %q: %w", path, err)
	}
	if err := os.MkdirAll(abs, DirMode); err != nil {
		return nil, fmt.Errorf("configmap: creating the directory %s: %w", abs, err)
	}
	return &Dir{path: abs}, nil
}

// Path is the directory instances read from.
func (d *Dir) Path() string { return d.path }

// String names the target in errors.
func (d *Dir) String() string { return "directory " + d.path }

// Generation returns the generation of the files in place, 0 when none was written.
func (d *Dir) Generation() (uint64, error) {
	gen, _, err := d.current()
	return gen, err
}

// WriteFiles puts files in place as generation (see adapters.ConfigTarget). It refuses an
// older generation than the one in place with *adapters.GenerationError. The same
// generation with the same files again only repairs the links a crashed write may have left
// unmade; with other files (a rotated password) it replaces them, all at once.
func (d *Dir) WriteFiles(ctx context.Context, generation uint64, files render.Files) error {
	if generation == 0 {
		return fmt.Errorf("configmap: %s: generation 0 is never written (records start at 1)", d)
	}
	if len(files) == 0 {
		return fmt.Errorf("configmap: %s: generation %d has no files; render the record first", d, generation)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if f.Name == "" || f.Name == "." || strings.HasPrefix(f.Name, "..") || strings.ContainsAny(f.Name, "/\\\x00") {
			return fmt.Errorf("configmap: %s: file name %q must be a plain name not beginning with \"..\" (the layout's own names)", d, f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("configmap: %s: file %q given twice", d, f.Name)
		}
		seen[f.Name] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	unlock, err := lockDir(ctx, filepath.Join(d.path, lockName))
	if err != nil {
		return fmt.Errorf("configmap: %s: taking the writer's lock: %w", d, err)
	}
	defer unlock()

	have, cur, err := d.current()
	if err != nil {
		return err
	}
	switch {
	case have > generation:
		return &adapters.GenerationError{Target: d.String(), Have: have, Want: generation}
	case have == generation:
		err := sameFiles(filepath.Join(d.path, cur), files)
		if err == nil {
			return d.link(files)
		}
		if !errors.Is(err, errDifferentFiles) {
			return fmt.Errorf("configmap: %s: generation %d: %w", d, generation, err)
		}
		// The same generation with other files: its credentials changed (a rotated
		// password is part of what a generation's files are; the routing is the same).
		// They replace the files in place like a new generation. The pusher issues one
		// write at a time and waits out a write it lost track of, so an older rendering
		// of this generation does not land after this one.
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("configmap: %s: not writing generation %d: %w", d, generation, err)
	}
	next, err := d.fill(generation, files)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		os.RemoveAll(filepath.Join(d.path, next))
		return fmt.Errorf("configmap: %s: not writing generation %d: %w", d, generation, err)
	}
	// The swap: from here on instances read generation. It is not abandoned halfway.
	if err := replaceLink(d.path, dataLink, next); err != nil {
		return fmt.Errorf("configmap: %s: switching %s to generation %d: %w (nothing changed for readers; retry)", d, dataLink, generation, err)
	}
	if err := syncDir(d.path); err != nil {
		return fmt.Errorf("configmap: %s: making the switch to generation %d durable: %w", d, generation, err)
	}
	if err := d.link(files); err != nil {
		return err
	}
	return d.prune(next, cur)
}

// current reads which generation directory ..data points at and the generation recorded
// in it; an absent ..data is generation 0.
func (d *Dir) current() (uint64, string, error) {
	link := filepath.Join(d.path, dataLink)
	target, err := os.Readlink(link)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("configmap: %s: %s is not a symlink (%w); this directory was not laid out by configmap: use an empty one", d, dataLink, err)
	}
	if !strings.HasPrefix(target, genPrefix) || strings.Contains(target, "/") {
		return 0, "", fmt.Errorf("configmap: %s: %s points at %q, not a generation directory: %w (remove %s to start over)", d, dataLink, target, adapters.ErrCorrupt, link)
	}
	b, err := os.ReadFile(filepath.Join(d.path, target, marker))
	if err != nil {
		return 0, "", fmt.Errorf("configmap: %s: reading the generation marker of %s: %w (remove %s to start over)", d, target, err, link)
	}
	gen, err := parseMarker(b)
	if err != nil {
		return 0, "", fmt.Errorf("configmap: %s: %s/%s: %w: %w (remove %s to start over)", d, target, marker, adapters.ErrCorrupt, err, link)
	}
	return gen, target, nil
}

// fill writes a new generation directory and makes it durable; it returns its name.
func (d *Dir) fill(generation uint64, files render.Files) (string, error) {
	tmp, err := os.MkdirTemp(d.path, fmt.Sprintf("%s%020d.", genPrefix, generation))
	if err != nil {
		return "", fmt.Errorf("configmap: %s: creating the directory of generation %d: %w (is it writable?)", d, generation, err)
	}
	if err := os.Chmod(tmp, DirMode); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("configmap: %s: %w", d, err)
	}
	write := func() error {
		for _, f := range files {
			if err := writeFile(filepath.Join(tmp, f.Name), f.Data); err != nil {
				return err
			}
		}
		if err := writeFile(filepath.Join(tmp, marker), formatMarker(generation)); err != nil {
			return err
		}
		return syncDir(tmp)
	}
	if err := write(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("configmap: %s: writing generation %d: %w (nothing changed for readers; retry)", d, generation, err)
	}
	return filepath.Base(tmp), nil
}

// link points every file's link through ..data and removes the links of files the
// generation in place no longer has.
func (d *Dir) link(files render.Files) error {
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
		link := filepath.Join(d.path, f.Name)
		if t, err := os.Readlink(link); err == nil && t == dataLink+"/"+f.Name {
			continue
		}
		if err := replaceLink(d.path, f.Name, dataLink+"/"+f.Name); err != nil {
			return fmt.Errorf("configmap: %s: linking %s through %s: %w (retry the write; the files are in place under %s)", d, f.Name, dataLink, err, dataLink)
		}
	}
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("configmap: %s: %w", d, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || want[name] || e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if t, err := os.Readlink(filepath.Join(d.path, name)); err == nil && t == dataLink+"/"+name {
			if err := os.Remove(filepath.Join(d.path, name)); err != nil {
				return fmt.Errorf("configmap: %s: removing the link of %s, which the generation in place no longer has: %w", d, name, err)
			}
		}
	}
	return syncDir(d.path)
}

// prune removes the generation directories other than cur and prev (the one readers may
// still be reading), and what crashed writes left behind.
func (d *Dir) prune(cur, prev string) error {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("configmap: %s: %w", d, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, genPrefix) && name != cur && name != prev || strings.HasPrefix(name, tempPrefix) {
			if err := os.RemoveAll(filepath.Join(d.path, name)); err != nil {
				return fmt.Errorf("configmap: %s: removing %s, left by an earlier write: %w", d, name, err)
			}
		}
	}
	return nil
}

// sameFiles reports whether dir holds exactly files (besides its marker).
func sameFiles(dir string, files render.Files) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	n := 0
	for _, e := range entries {
		if e.Name() != marker {
			n++
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s is new", errDifferentFiles, f.Name)
		}
		if err != nil {
			return err
		}
		if !bytes.Equal(b, f.Data) {
			return fmt.Errorf("%w: %s differs", errDifferentFiles, f.Name)
		}
	}
	if n != len(files) {
		return fmt.Errorf("%w: it holds %d files, not %d", errDifferentFiles, n, len(files))
	}
	return nil
}

func formatMarker(gen uint64) []byte { return []byte(strconv.FormatUint(gen, 10) + "\n") }

// parseMarker accepts only what formatMarker writes: a canonical decimal of at least 1
// and a newline.
func parseMarker(b []byte) (uint64, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || s == "" || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("marker %q is not a generation (want its decimal and a newline)", b)
	}
	g, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("marker %q is not a generation: %w", b, err)
	}
	return g, nil
}

// writeFile creates path (it must not exist) with data and syncs it.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// replaceLink makes dir/name a symlink to target with one rename, whatever dir/name was
// (absent, a link, a file), so a reader finds either the old one or the new.
func replaceLink(dir, name, target string) error {
	tmp := filepath.Join(dir, tempPrefix+name)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
