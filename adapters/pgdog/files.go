package pgdog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"loam.dev/router/kernel/render"
)

// WriteFiles puts files into dir, each one atomically: written to a temporary file in dir,
// synced, renamed over the old one, and the directory synced. A reader (PgDog's RELOAD, a
// restart) therefore sees each file whole, old or new, never a torn one. The set is not
// atomic: a crash between two renames leaves pgdog.toml and users.toml of different
// generations, which the generation marker shows as no generation at all (see
// render.GenerationDatabase) rather than a wrong one.
func WriteFiles(dir string, files render.Files) error {
	if dir == "" {
		return errors.New("pgdog: no config directory to write the files to (set Config.Dir to the directory of the instance's --config and --users files)")
	}
	for _, f := range files {
		if err := writeFile(dir, f); err != nil {
			return err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pgdog: syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("pgdog: syncing %s: %w", dir, err)
	}
	return nil
}

func writeFile(dir string, f render.File) (err error) {
	if f.Name == "" || filepath.Base(f.Name) != f.Name || f.Name == "." || f.Name == ".." {
		return fmt.Errorf("pgdog: file name %q must be a plain file name", f.Name)
	}
	tmp, err := os.CreateTemp(dir, "."+f.Name+".tmp-*")
	if err != nil {
		return fmt.Errorf("pgdog: writing %s into %s: %w", f.Name, dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(f.Data); err != nil {
		return fmt.Errorf("pgdog: writing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("pgdog: syncing %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("pgdog: closing %s: %w", tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), filepath.Join(dir, f.Name)); err != nil {
		return fmt.Errorf("pgdog: replacing %s: %w", filepath.Join(dir, f.Name), err)
	}
	return nil
}
