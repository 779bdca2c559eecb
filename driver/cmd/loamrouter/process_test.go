package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
)

// The tests in this file run the real binary as separate processes.

var (
	buildMu sync.Mutex
	built   = map[string]string{} // build tags → binary
	binDir  string
)

// binary builds loamrouter once per test process.
func binary(t *testing.T) string { return binaryTagged(t, "") }

// binaryTagged builds loamrouter with build tags (a mutant build), once per tag set.
func binaryTagged(t *testing.T, tags string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[tags]; ok {
		return p
	}
	if binDir == "" {
		dir, err := os.MkdirTemp("", "loamrouter-bin-")
		require.NoError(t, err)
		binDir = dir
	}
	p := filepath.Join(binDir, "loamrouter"+strings.ReplaceAll(tags, ",", "-"))
	out, err := exec.Command("go", "build", "-tags", tags, "-o", p, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	built[tags] = p
	return p
}

// TestMain removes the binaries it built.
func TestMain(m *testing.M) {
	code := m.Run()
	vitessCluster.Close()
	pgtest.RemoveTemplate()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// proc is one running loamrouter process.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr string
	done   chan struct{}
	err    error
}

// start runs the binary with args; its stderr goes to a file kept for failure messages.
func start(t *testing.T, dir, name string, args ...string) *proc {
	return startWith(t, binary(t), dir, name, args...)
}

func startWith(t *testing.T, bin, dir, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, stderr: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.stderr)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stderr = logf
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

// stop sends SIGSTOP and returns once every thread of the process has stopped. A stop
// signal is taken by one thread, which then stops the others; until that thread is
// scheduled the process keeps running (and answering /status), which on a loaded machine
// can last long enough for a test to read a "stopped" leader's reply.
func (p *proc) stop() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGSTOP))
	deadline := time.Now().Add(10 * time.Second)
	for !allThreadsStopped(p.t, p.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s (pid %d) not stopped 10s after SIGSTOP", p.name, p.cmd.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reads each thread's state from /proc/<pid>/task/<tid>/stat (the field
// after the command name in parentheses): T is stopped by a signal.
func allThreadsStopped(t *testing.T, pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	require.NoError(t, err, "reading thread states needs Linux /proc")
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread exited
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+2 >= len(data) || data[i+2] != 'T' {
			return false
		}
	}
	return len(tasks) > 0
}

func (p *proc) log() string {
	data, _ := os.ReadFile(p.stderr)
	return string(data)
}

// startStore runs store-serve on a free port with the tests' credentials and returns its URL.
func startStore(t *testing.T, dir string) (*proc, string) {
	t.Helper()
	setTestTokens(t)
	return startStoreConf(t, dir, "[controller]\nread_timeout = \"3s\"\n"+testAuth)
}

// startStoreConf runs store-serve with conf as its loam.toml and returns its URL (the first
// line it prints).
func startStoreConf(t *testing.T, dir, conf string) (*proc, string) {
	t.Helper()
	p := &proc{t: t, name: "store", stderr: filepath.Join(dir, "store.log"), done: make(chan struct{})}
	logf, err := os.Create(p.stderr)
	require.NoError(t, err)
	path := filepath.Join(dir, "store.toml")
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	p.cmd = exec.Command(binary(t), "--config", path, "store-serve", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "store-data"))
	p.cmd.Dir = dir
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "store-serve printed no URL: %s", p.log())
	return p, strings.TrimSpace(line)
}

// run runs the binary to completion and returns its stdout.
func runBin(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if !slices.Contains(args, "--token-env") && !slices.Contains(args, "--config") {
		args = append([]string{"--token-env", "LOAM_TEST_OPS_TOKEN"}, args...)
	}
	cmd := exec.Command(binary(t), args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("loamrouter %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)
	return string(out)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

type status struct {
	Holder string `json:"holder"`
	Leader bool   `json:"leader"`
	Epoch  uint64 `json:"epoch"`
	PID    int    `json:"pid"`
	Why    string `json:"why"`
}

func getStatus(addr string) (status, error) {
	c := http.Client{Timeout: 10 * time.Second} // answers at once; generous for a loaded machine
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return status{}, err
	}
	res, err := c.Do(withOpsToken(req))
	if err != nil {
		return status{}, err
	}
	defer res.Body.Close()
	var s status
	err = json.NewDecoder(res.Body).Decode(&s)
	return s, err
}
