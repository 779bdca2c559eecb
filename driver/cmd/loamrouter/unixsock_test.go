package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
	"loam.dev/router/controller/daemon"
)

// TestUnixSocketListen: controller.listen = "unix:<path>" serves without a credential on a
// socket only its owner can open (mode 0600); the CLI reaches the daemon holding the
// embedded store through it; a socket in a directory others can write is refused.
func TestUnixSocketListen(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "ctl.sock")
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o700))
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte("[controller]\nid = \"ctl-unix\"\nlisten = \"unix:"+sock+"\"\n[store]\ndir = \""+filepath.Join(dir, "data")+"\"\n"), 0o600))
	var logs bytes.Buffer
	serveIn(t, &cli{}, conf, &logs)
	require.Eventually(t, func() bool {
		fi, err := os.Stat(sock)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	}, 10*time.Second, 10*time.Millisecond, "no socket: %s", &logs)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	// The embedded store is the daemon's: the CLI goes through the socket, no token.
	out, err := run(t, "--config", conf, "map", "init", "app", "--example")
	require.NoError(t, err, out)
	out, err = run(t, "--config", conf, "audit")
	require.NoError(t, err, out)
	require.Contains(t, out, "by unix:uid-", "the audit names the socket's user")

	open := filepath.Join(dir, "open")
	require.NoError(t, os.MkdirAll(open, 0o700))
	require.NoError(t, os.Chmod(open, 0o777))
	_, err = daemon.Listen(&controller.Config{}, "controller.listen", "unix:"+filepath.Join(open, "ctl.sock"), nil)
	require.ErrorContains(t, err, "is writable by others")
}
