package pglaunch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoOwner means the program runs as root and there is no "postgres" user to run Postgres
// as (Postgres refuses to run as root).
var ErrNoOwner = errors.New("no user to run postgres as")

// owner is the OS account the servers run as: the current one, or "postgres" when the
// current one is root (Postgres refuses to run as root).
type owner struct {
	uid, gid int
	cred     *syscall.Credential // nil: run as the current user
}

func currentOwner() (owner, error) {
	if os.Geteuid() != 0 {
		return owner{uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return owner{}, fmt.Errorf("pglaunch: running as root, Postgres must run as another user and %w (create a \"postgres\" user, as the Debian package does): %w", err, ErrNoOwner)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return owner{}, fmt.Errorf("pglaunch: user postgres has uid %q gid %q, not numbers", u.Uid, u.Gid)
	}
	return owner{uid: uid, gid: gid, cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// command prepares a PostgreSQL program to run as the owner. Pdeathsig kills it if the
// process that started it dies first, so an interrupted go test or demo leaves no server
// behind.
func (o owner) command(bin, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	return cmd
}

// run runs a PostgreSQL program to completion; the error carries its output.
func (o owner) run(bin, name string, args ...string) error {
	cmd := o.command(bin, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pglaunch: %s %s: %w\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// mkdir makes a private directory under the temp dir that the owner can use; the path to it
// must be searchable by the owner (CI sets TMPDIR to a 0755 directory; /tmp is 1777).
func (o owner) mkdir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("pglaunch: making a directory under %s: %w", os.TempDir(), err)
	}
	if err := os.Chown(dir, o.uid, o.gid); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("pglaunch: handing %s to uid %d: %w", dir, o.uid, err)
	}
	return dir, nil
}
