// Package serverproc runs the server programs this module starts itself (postgres for
// pglaunch and loamrouter's demo; mariadbd, etcd, vtctld and the rest for the conformance
// helpers' tests): in a process group of their own, so stopping one ends its children too,
// with the log kept for the error a failing start or stop reports.
package serverproc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// FreePort returns a TCP port free on 127.0.0.1 right now. Another process can take it
// before the server binds it; the helpers detect that from the server's log and retry.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Proc is a started server program.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the program has exited
	stop   sync.Once
}

// Start starts cmd, which must run in its own process group (SysProcAttr.Setpgid), and
// reaps it when it exits.
func Start(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid {
		return nil, fmt.Errorf("serverproc: %s must run in its own process group (SysProcAttr.Setpgid)", cmd.Path)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the program has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// State is the exit state, once Exited is closed.
func (p *Proc) State() *os.ProcessState { return p.cmd.ProcessState }

// Pid is the program's process id (and its process group's).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill ends the program and its process group at once and waits for it.
func (p *Proc) Kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// Stop sends sig (the program's own shutdown signal) and waits up to timeout for it to
// exit, then kills it; it reports whether it had to. Stopping twice is harmless.
func (p *Proc) Stop(sig syscall.Signal, timeout time.Duration) (killed bool) {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		p.cmd.Process.Signal(sig)
		select {
		case <-p.exited:
		case <-time.After(timeout):
			p.Kill()
			killed = true
		}
	})
	return killed
}

// LogTail is the end of the log file at path, for an error message.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
