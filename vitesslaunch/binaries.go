package vitesslaunch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvBinDir names the directory holding the Vitess programs (vtctld, vtctldclient,
// vttablet, mysqlctl, vtgate), as vitessbin/build.sh prints it.
const EnvBinDir = "LOAM_VITESS_BIN"

// Version is the Vitess release whose programs and configuration files the cluster uses.
const Version = "v0.24.4"

// ErrNoBinaries means a program the cluster needs is missing.
var ErrNoBinaries = errors.New("no Vitess binaries")

// Binaries are the programs a cluster runs.
type Binaries struct {
	Vtctld, Vtctldclient, Vttablet, Mysqlctl, Vtgate string
	Etcd                                             string
	// MySQLRoot is the prefix whose bin/ or sbin/ holds mysqld (mysqlctl's VT_MYSQL_ROOT):
	// /usr for Debian's mariadb-server.
	MySQLRoot string
}

// FindBinaries finds the Vitess programs in $LOAM_VITESS_BIN, etcd on PATH or in /usr/bin,
// and mysqld under /usr.
func FindBinaries() (Binaries, error) {
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		return Binaries{}, fmt.Errorf("vitesslaunch: %s is not set; build the programs with conformance/vitesstest/vitessbin/build.sh and export %s=<the directory it prints>: %w", EnvBinDir, EnvBinDir, ErrNoBinaries)
	}
	b := Binaries{
		Vtctld: filepath.Join(dir, "vtctld"), Vtctldclient: filepath.Join(dir, "vtctldclient"),
		Vttablet: filepath.Join(dir, "vttablet"), Mysqlctl: filepath.Join(dir, "mysqlctl"), Vtgate: filepath.Join(dir, "vtgate"),
		MySQLRoot: "/usr",
	}
	for _, p := range []string{b.Vtctld, b.Vtctldclient, b.Vttablet, b.Mysqlctl, b.Vtgate} {
		if err := checkExecutable(p); err != nil {
			return Binaries{}, fmt.Errorf("vitesslaunch: %s=%s: %w (run conformance/vitesstest/vitessbin/build.sh)", EnvBinDir, dir, err)
		}
	}
	if os.Geteuid() == 0 {
		if err := reachableByOthers(dir); err != nil {
			return Binaries{}, err
		}
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		etcd = "/usr/bin/etcd"
		if checkExecutable(etcd) != nil {
			return Binaries{}, fmt.Errorf("vitesslaunch: etcd is not on PATH nor in /usr/bin (apt-get install etcd-server): %w", ErrNoBinaries)
		}
	}
	b.Etcd = etcd
	if checkExecutable(filepath.Join(b.MySQLRoot, "sbin", "mysqld")) != nil && checkExecutable(filepath.Join(b.MySQLRoot, "bin", "mysqld")) != nil {
		return Binaries{}, fmt.Errorf("vitesslaunch: no mysqld under %s/sbin or %s/bin (apt-get install mariadb-server): %w", b.MySQLRoot, b.MySQLRoot, ErrNoBinaries)
	}
	return b, nil
}

// reachableByOthers checks that every directory down to dir can be searched by any user:
// as root the cluster runs the programs as nobody.
func reachableByOthers(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("vitesslaunch: %s=%s: %w", EnvBinDir, dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("vitesslaunch: %s=%s: %w", EnvBinDir, dir, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("vitesslaunch: %s=%s: the Vitess programs run as nobody, who cannot reach them: %s is mode %o; build them into a directory outside it (build.sh's default as root is /var/cache/loam/vitess-%s)", EnvBinDir, dir, d, st.Mode().Perm(), Version)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrNoBinaries)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file: %w", p, ErrNoBinaries)
	}
	return nil
}
