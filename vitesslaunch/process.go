package vitesslaunch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"loam.dev/router/internal/serverproc"
)

// startTimeout bounds how long one program may take to start serving.
const startTimeout = 3 * time.Minute

// unprivileged is the user the programs run as when the tests run as root (Vitess's
// servers exit with "running this as root makes no sense"); nil otherwise.
func unprivileged() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: running as root needs the user nobody to run Vitess as: %w", err)
	}
	g, err := user.LookupGroup("nogroup")
	if err != nil {
		if g, err = user.LookupGroup("nobody"); err != nil {
			return nil, fmt.Errorf("vitesslaunch: running as root needs the group nogroup (or nobody) to run Vitess as: %w", err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// handOver gives dir and everything under it to cred's user, so the programs running as
// that user can write there.
func handOver(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(cred.Uid), int(cred.Gid))
	})
}

// command prepares one of the cluster's programs: in its own process group (so stopping it
// ends its children), killed if the test process dies, as the unprivileged user, with
// Vitess's environment and its output appended to logs/<name>.log.
func (c *Cluster) command(ctx context.Context, name, path string, args ...string) (*exec.Cmd, error) {
	logf, err := os.OpenFile(c.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: %w", err)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: c.cred}
	cmd.Env = append(os.Environ(), "HOME="+c.root, "VTDATAROOT="+c.dataRoot(), "VT_MYSQL_ROOT="+c.bins.MySQLRoot,
		"TMPDIR="+filepath.Join(c.root, "tmp"), "LC_ALL=C", "TZ=UTC")
	return cmd, nil
}

func (c *Cluster) logPath(name string) string { return filepath.Join(c.root, "logs", name+".log") }
func (c *Cluster) dataRoot() string           { return filepath.Join(c.root, "vtdataroot") }

// startServer starts a server program and waits until ready says it serves; a program that
// exits first, or never gets ready, is an error quoting its log.
func (c *Cluster) startServer(name string, cmd *exec.Cmd, ready func() error) (*serverproc.Proc, error) {
	p, err := serverproc.Start(cmd)
	if f, ok := cmd.Stderr.(*os.File); ok {
		f.Close() // the program has its own copy
	}
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: starting %s: %w", name, err)
	}
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.Exited():
			return nil, fmt.Errorf("vitesslaunch: %s exited while starting (%v)\n--- %s ---\n%s", name, p.State(), c.logPath(name), serverproc.LogTail(c.logPath(name)))
		default:
		}
		if last = ready(); last == nil {
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Kill()
	return nil, fmt.Errorf("vitesslaunch: %s not serving after %v: %w\n--- %s ---\n%s", name, startTimeout, last, c.logPath(name), serverproc.LogTail(c.logPath(name)))
}

// dialable is a readiness check: something accepts TCP connections at addr.
func dialable(addr string) func() error {
	return func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
		}
		return err
	}
}

// httpOK is a readiness check: GET url answers 200.
func httpOK(url string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// run runs a program of the cluster to completion (vtctldclient, mysqlctl), as the
// unprivileged user, with its standard error in logs/<name>.log, and returns its standard
// output; an error quotes both.
func (c *Cluster) run(ctx context.Context, name, path string, args ...string) ([]byte, error) {
	return c.runOut(ctx, true, name, path, args...)
}

// runOut is run, with the standard output in the log too unless capture is set: a program
// that leaves a daemon behind (mysqlctl init leaves mysqld) must not hold a pipe to us.
func (c *Cluster) runOut(ctx context.Context, capture bool, name, path string, args ...string) ([]byte, error) {
	cmd, err := c.command(ctx, name, path, args...)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	if capture {
		cmd.Stdout = &out
	}
	err = cmd.Run()
	if f, ok := cmd.Stderr.(*os.File); ok {
		f.Close()
	}
	if err != nil {
		return []byte(out.String()), fmt.Errorf("vitesslaunch: %s %s: %w\n%s\n--- %s ---\n%s", filepath.Base(path), strings.Join(args, " "), err,
			strings.TrimSpace(out.String()), c.logPath(name), serverproc.LogTail(c.logPath(name)))
	}
	return []byte(out.String()), nil
}

var errPortTaken = errors.New("port taken")

// freePorts returns n ports free on 127.0.0.1 right now (see serverproc.FreePort).
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := serverproc.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// portTaken says whether a program's log shows it lost its port to another process
// between FreePort and its bind.
func (c *Cluster) portTaken(name string) bool {
	t := serverproc.LogTail(c.logPath(name))
	return strings.Contains(t, "address already in use") || strings.Contains(t, "Address already in use")
}
