package mysqltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvBinDir names a directory holding mariadbd and mariadb-install-db, overriding the search
// of PATH, /usr/sbin and /usr/bin.
const EnvBinDir = "LOAM_MARIADB_BIN"

// EnvRequireReal, set to 1, turns every "skipped: needs mariadb" into a test failure; CI
// sets it so that a missing server cannot pass as a green run.
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// ErrNoBinaries means no usable MariaDB installation was found.
var ErrNoBinaries = errors.New("no MariaDB binaries")

// Binaries are the programs a server needs.
type Binaries struct {
	Server  string // mariadbd
	Install string // mariadb-install-db
}

// debianDirs are searched after PATH: root's PATH has /usr/sbin, a CI user's may not.
var debianDirs = []string{"/usr/sbin", "/usr/bin"}

// FindBinaries returns the programs the servers run: from $LOAM_MARIADB_BIN if set, else from
// PATH, /usr/sbin and /usr/bin.
func FindBinaries() (Binaries, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		b := Binaries{Server: filepath.Join(dir, "mariadbd"), Install: filepath.Join(dir, "mariadb-install-db")}
		for _, p := range []string{b.Server, b.Install} {
			if err := checkExecutable(p); err != nil {
				return Binaries{}, fmt.Errorf("mysqltest: %s=%s: %w", EnvBinDir, dir, err)
			}
		}
		return b, nil
	}
	server, err := lookPath("mariadbd")
	if err != nil {
		return Binaries{}, err
	}
	install, err := lookPath("mariadb-install-db")
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Server: server, Install: install}, nil
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range debianDirs {
		p := filepath.Join(dir, name)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("mysqltest: %s is not on PATH nor in %v (apt-get install mariadb-server, or set %s): %w", name, debianDirs, EnvBinDir, ErrNoBinaries)
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", p, err, ErrNoBinaries)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", p, ErrNoBinaries)
	}
	return nil
}

// missing ends a test that needs a real MariaDB it cannot have: a skip normally, a failure
// under LOAM_REQUIRE_REAL=1.
func missing(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("skipped: needs mariadb (%v)", err)
	if os.Getenv(EnvRequireReal) == "1" {
		t.Fatalf("%s; failing instead because %s=1", msg, EnvRequireReal)
	}
	t.Skip(msg)
}
