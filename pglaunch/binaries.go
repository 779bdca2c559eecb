package pglaunch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// EnvBinDir names the directory holding initdb, postgres and pg_basebackup, overriding the
// search of /usr/lib/postgresql.
const EnvBinDir = "LOAM_PG_BIN"

// debianRoot is where Debian installs each major version's binaries, as <version>/bin.
const debianRoot = "/usr/lib/postgresql"

// ErrNoBinaries means no usable PostgreSQL installation was found.
var ErrNoBinaries = errors.New("no PostgreSQL binaries")

// requiredBinaries are the programs this package runs.
var requiredBinaries = []string{"initdb", "postgres", "pg_basebackup"}

// BinDir is the directory of the PostgreSQL binaries the servers run: $LOAM_PG_BIN if set,
// else the bin directory of the highest major version under /usr/lib/postgresql.
func BinDir() (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir, checkBinDir(dir)
	}
	return highestVersionBinDir(debianRoot)
}

func highestVersionBinDir(root string) (string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("pglaunch: reading %s: %w (install postgresql or set %s): %w", root, err, EnvBinDir, ErrNoBinaries)
	}
	best, bestVersion := "", -1.0
	for _, e := range entries {
		v, err := strconv.ParseFloat(e.Name(), 64) // "15", "16", and old "9.6"
		if err != nil {
			continue
		}
		dir := filepath.Join(root, e.Name(), "bin")
		if v > bestVersion && checkBinDir(dir) == nil {
			best, bestVersion = dir, v
		}
	}
	if best == "" {
		return "", fmt.Errorf("pglaunch: no %s/<version>/bin holds %s (install postgresql or set %s): %w",
			root, strings.Join(requiredBinaries, ", "), EnvBinDir, ErrNoBinaries)
	}
	return best, nil
}

func checkBinDir(dir string) error {
	for _, name := range requiredBinaries {
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pglaunch: %s: %w: %w", p, err, ErrNoBinaries)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("pglaunch: %s is not an executable file: %w", p, ErrNoBinaries)
		}
	}
	return nil
}
