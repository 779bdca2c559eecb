package serverproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func group(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func TestStartNeedsItsOwnProcessGroup(t *testing.T) {
	_, err := Start(exec.Command("sleep", "10"))
	require.ErrorContains(t, err, "own process group")
}

// TestStopSignalsThenKills: a program that honours the signal exits without a kill; one
// that ignores it is killed, with its children (the whole process group), after the timeout.
func TestStopSignalsThenKills(t *testing.T) {
	p, err := Start(group("sleep", "30"))
	require.NoError(t, err)
	require.False(t, p.Stop(syscall.SIGTERM, 10*time.Second))
	<-p.Exited()
	require.False(t, p.Stop(syscall.SIGTERM, time.Second), "stopping twice")

	pidFile := filepath.Join(t.TempDir(), "child")
	p, err = Start(group("sh", "-c", `trap "" TERM; sleep 30 & echo $! > `+pidFile+`; wait`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := os.Stat(pidFile); return err == nil }, 5*time.Second, 10*time.Millisecond)
	require.True(t, p.Stop(syscall.SIGTERM, 200*time.Millisecond), "a program ignoring the signal is killed")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	var child int
	_, err = fmt.Sscan(strings.TrimSpace(string(b)), &child)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return syscall.Kill(child, 0) == syscall.ESRCH }, 5*time.Second, 10*time.Millisecond,
		"the child in the process group survived the kill")
}

func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	require.Contains(t, LogTail(path), "no log")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 5000)+"END"), 0o644))
	tail := LogTail(path)
	require.Len(t, tail, 4000)
	require.True(t, strings.HasSuffix(tail, "END"))
}
