package configmap_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// gen renders the files of generation g: every file names its generation, so a reader can
// tell which generation each file it read came from.
func gen(t testing.TB, g uint64, names ...string) render.Files {
	if len(names) == 0 {
		names = []string{"pgdog.toml", "users.toml"}
	}
	var fs []render.File
	for _, n := range names {
		fs = append(fs, render.File{Name: n, Data: fmt.Appendf(nil, "# %s generation %d\n", n, g)})
	}
	files, err := render.NewFiles(fs...)
	require.NoError(t, err)
	return files
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(b)
}

// entries lists the directory's names that begin with prefix.
func entries(t *testing.T, dir, prefix string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func newDir(t *testing.T) *configmap.Dir {
	d, err := configmap.NewDir(filepath.Join(t.TempDir(), "pgdog"))
	require.NoError(t, err)
	return d
}

// TestWriteFiles: each generation's files are readable at the paths instances are given,
// the generation is recorded, a file a later generation drops disappears and one it adds
// appears.
func TestWriteFiles(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	g, err := d.Generation()
	require.NoError(t, err)
	require.Zero(t, g)

	require.NoError(t, d.WriteFiles(ctx, 4, gen(t, 4, "pgdog.toml", "users.toml", "old.toml")))
	require.Equal(t, "# pgdog.toml generation 4\n", read(t, d.Path(), "pgdog.toml"))
	require.Equal(t, "# old.toml generation 4\n", read(t, d.Path(), "old.toml"))
	g, err = d.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(4), g)
	require.Equal(t, "4\n", read(t, d.Path(), "..data/..generation"))

	require.NoError(t, d.WriteFiles(ctx, 5, gen(t, 5, "pgdog.toml", "users.toml", "new.toml")))
	require.Equal(t, "# users.toml generation 5\n", read(t, d.Path(), "users.toml"))
	require.Equal(t, "# new.toml generation 5\n", read(t, d.Path(), "new.toml"))
	_, err = os.Lstat(filepath.Join(d.Path(), "old.toml"))
	require.ErrorIs(t, err, os.ErrNotExist, "a file generation 5 does not have is gone")
	g, err = d.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(5), g)

	// A second Dir on the same path (another process, after a restart) reads the same.
	d2, err := configmap.NewDir(d.Path())
	require.NoError(t, err)
	g, err = d2.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(5), g)
}

// TestTakesOverPlainFiles: a directory an instance was first started with, holding plain
// files of its own, is taken over by the first write: the files become links into the
// generation, nothing is left but the layout, and a path that is not a file of the
// generation is left alone.
func TestTakesOverPlainFiles(t *testing.T) {
	path := t.TempDir()
	for _, name := range []string{"pgdog.toml", "users.toml", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(path, name), []byte("hand-written\n"), 0o600))
	}
	d, err := configmap.NewDir(path)
	require.NoError(t, err)
	require.NoError(t, d.WriteFiles(context.Background(), 1, gen(t, 1)))
	for _, name := range []string{"pgdog.toml", "users.toml"} {
		require.Equal(t, "# "+name+" generation 1\n", read(t, path, name))
		target, err := os.Readlink(filepath.Join(path, name))
		require.NoError(t, err, "%s is a link now", name)
		require.Equal(t, "..data/"+name, target)
	}
	require.Equal(t, "hand-written\n", read(t, path, "notes.txt"))
	require.Empty(t, entries(t, path, "..tmp"), "no temporary link is left")
	require.Len(t, entries(t, path, "..g"), 1)

	_, err = configmap.NewDir("")
	require.ErrorContains(t, err, "no directory given", "an empty path is not the working directory")
}

// TestOlderGenerationRefused: a write of an older generation (a retry that timed out and
// landed late) changes nothing and says so with ErrNewerGeneration and the generations.
func TestOlderGenerationRefused(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	require.NoError(t, d.WriteFiles(ctx, 7, gen(t, 7)))
	err := d.WriteFiles(ctx, 6, gen(t, 6))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	var ge *adapters.GenerationError
	require.ErrorAs(t, err, &ge)
	require.Equal(t, adapters.GenerationError{Target: "directory " + d.Path(), Have: 7, Want: 6}, *ge)
	require.Equal(t, "# pgdog.toml generation 7\n", read(t, d.Path(), "pgdog.toml"))
	require.Len(t, entries(t, d.Path(), "..g"), 1, "the refused write left nothing behind")
}

// TestSameGenerationAgain: writing the generation in place again with the same files is
// not an error (a retried push) and changes nothing; with other files (the same record
// rendered with a rotated password) they replace the old ones, all at once.
func TestSameGenerationAgain(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	require.NoError(t, d.WriteFiles(ctx, 3, gen(t, 3)))
	require.NoError(t, d.WriteFiles(ctx, 3, gen(t, 3)))
	require.Len(t, entries(t, d.Path(), "..g"), 1, "the same files again write nothing new")

	other := gen(t, 3)
	other[0].Data = []byte("# rendered with other credentials\n")
	require.NoError(t, d.WriteFiles(ctx, 3, other))
	require.Equal(t, "# rendered with other credentials\n", read(t, d.Path(), other[0].Name))
	g, err := d.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(3), g)
	require.NoError(t, d.WriteFiles(ctx, 3, gen(t, 3, "pgdog.toml")))
	_, err = os.Stat(filepath.Join(d.Path(), "users.toml"))
	require.ErrorIs(t, err, os.ErrNotExist, "a file the new rendering lacks is gone")
	require.Len(t, entries(t, d.Path(), "..g"), 2, "the rendering in place and the one before it, as for a new generation")
}

// TestRepairAfterCrash: a writer that died after the swap but before linking the files
// (simulated by removing a link) and one that died while filling a generation directory
// (a stray directory and a stray temporary link) leave a directory that reads the last
// complete generation; the next writes repair and clean it.
func TestRepairAfterCrash(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	require.NoError(t, d.WriteFiles(ctx, 1, gen(t, 1)))
	require.NoError(t, os.Remove(filepath.Join(d.Path(), "users.toml")))
	require.NoError(t, os.Mkdir(filepath.Join(d.Path(), "..g00000000000000000002.crashed"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), "..g00000000000000000002.crashed", "pgdog.toml"), []byte("half"), 0o644))
	require.NoError(t, os.Symlink("nowhere", filepath.Join(d.Path(), "..tmp.pgdog.toml")))

	g, err := d.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(1), g, "a crashed write is not the generation in place")
	require.NoError(t, d.WriteFiles(ctx, 1, gen(t, 1)), "the retry of generation 1 relinks")
	require.Equal(t, "# users.toml generation 1\n", read(t, d.Path(), "users.toml"))

	require.NoError(t, d.WriteFiles(ctx, 2, gen(t, 2)))
	require.Equal(t, "# pgdog.toml generation 2\n", read(t, d.Path(), "pgdog.toml"))
	require.Empty(t, entries(t, d.Path(), "..tmp."))
	require.NotContains(t, entries(t, d.Path(), "..g"), "..g00000000000000000002.crashed")
}

// TestKeepsPreviousGeneration: the generation directory readers may still be reading
// survives one write, and no more.
func TestKeepsPreviousGeneration(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	for g := uint64(1); g <= 6; g++ {
		require.NoError(t, d.WriteFiles(ctx, g, gen(t, g)))
		want := min(int(g), 2)
		require.Len(t, entries(t, d.Path(), "..g"), want, "after generation %d", g)
	}
	dirs := entries(t, d.Path(), "..g")
	require.True(t, strings.HasPrefix(dirs[0], "..g00000000000000000005."), dirs)
	require.True(t, strings.HasPrefix(dirs[1], "..g00000000000000000006."), dirs)
}

// TestReplacesPlainFile: a hand-written pgdog.toml in the directory (a development setup
// before Loam) is replaced by the link, in one rename.
func TestReplacesPlainFile(t *testing.T) {
	d := newDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), "pgdog.toml"), []byte("# by hand\n"), 0o644))
	require.NoError(t, d.WriteFiles(context.Background(), 1, gen(t, 1)))
	require.Equal(t, "# pgdog.toml generation 1\n", read(t, d.Path(), "pgdog.toml"))
	target, err := os.Readlink(filepath.Join(d.Path(), "pgdog.toml"))
	require.NoError(t, err)
	require.Equal(t, "..data/pgdog.toml", target)
}

// TestRefusals: what is never written, and a directory this package did not lay out.
func TestRefusals(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	require.ErrorContains(t, d.WriteFiles(ctx, 0, gen(t, 0)), "generation 0")
	require.ErrorContains(t, d.WriteFiles(ctx, 1, nil), "no files")
	for _, name := range []string{"..data", "..generation", "a/b", "", ".."} {
		err := d.WriteFiles(ctx, 1, render.Files{{Name: name, Data: []byte("x")}})
		require.ErrorContains(t, err, "plain name", name)
	}
	require.ErrorContains(t, d.WriteFiles(ctx, 1, render.Files{{Name: "a"}, {Name: "a"}}), "given twice")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.WriteFiles(cancelled, 1, gen(t, 1)), context.Canceled)
	g, err := d.Generation()
	require.NoError(t, err)
	require.Zero(t, g, "nothing written under a cancelled context")

	// A corrupt marker: the generation in place cannot be known, so nothing is written.
	require.NoError(t, d.WriteFiles(ctx, 1, gen(t, 1)))
	require.NoError(t, os.Chmod(filepath.Join(d.Path(), "..data", "..generation"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.Path(), "..data", "..generation"), []byte("01\n"), 0o644))
	err = d.WriteFiles(ctx, 2, gen(t, 2))
	require.ErrorIs(t, err, adapters.ErrCorrupt)
	require.ErrorContains(t, err, "remove "+filepath.Join(d.Path(), "..data")+" to start over")
	require.Equal(t, "# pgdog.toml generation 1\n", read(t, d.Path(), "pgdog.toml"))

	// ..data that is not a link: not laid out by this package.
	d2 := newDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(d2.Path(), "..data"), 0o755))
	require.ErrorContains(t, d2.WriteFiles(ctx, 1, gen(t, 1)), "not a symlink")
}

// TestConcurrentWriters: writers racing with every generation from 1 to 40, in two Dir
// values on one path (as two processes would), end with the highest generation in place;
// every write either succeeded or was refused as older, and no write moved the generation
// backwards.
func TestConcurrentWriters(t *testing.T) {
	a := newDir(t)
	b, err := configmap.NewDir(a.Path())
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for g := uint64(1); g <= 40; g++ {
		for _, d := range []*configmap.Dir{a, b} {
			wg.Go(func() {
				before, _ := d.Generation()
				err := d.WriteFiles(ctx, g, gen(t, g))
				after, _ := d.Generation()
				if after < before {
					err = fmt.Errorf("generation went from %d to %d", before, after)
				}
				if err != nil && !errors.Is(err, adapters.ErrNewerGeneration) {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	g, err := a.Generation()
	require.NoError(t, err)
	require.Equal(t, uint64(40), g)
	require.Equal(t, "# pgdog.toml generation 40\n", read(t, a.Path(), "pgdog.toml"))
}

// TestReadersSeeOneGeneration: while generations are written, a reader that resolves
// ..data once reads every file of one generation, and a reader going through the files'
// own links never reads a file half written.
func TestReadersSeeOneGeneration(t *testing.T) {
	d := newDir(t)
	ctx := context.Background()
	require.NoError(t, d.WriteFiles(ctx, 1, gen(t, 1)))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for g := uint64(2); g <= 60; g++ {
			if err := d.WriteFiles(ctx, g, gen(t, g)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			require.Positive(t, reads)
			return
		default:
		}
		target, err := os.Readlink(filepath.Join(d.Path(), "..data"))
		require.NoError(t, err)
		var g0 uint64
		for i, name := range []string{"pgdog.toml", "users.toml"} {
			b, err := os.ReadFile(filepath.Join(d.Path(), target, name))
			if os.IsNotExist(err) {
				break // the previous-but-one generation was pruned under this slow reader
			}
			require.NoError(t, err)
			var g uint64
			_, err = fmt.Sscanf(string(b), "# "+name+" generation %d\n", &g)
			require.NoError(t, err, "read %q", b)
			if i == 0 {
				g0 = g
			}
			require.Equal(t, g0, g, "files of two generations under one ..data")
		}
		b, err := os.ReadFile(filepath.Join(d.Path(), "users.toml"))
		require.NoError(t, err)
		require.Regexp(t, `^# users\.toml generation \d+\n$`, string(b))
		reads++
	}
}
