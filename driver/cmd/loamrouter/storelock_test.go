package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/controller/daemon"
)

// TestServeSaysTheStoreIsLocked: a daemon whose embedded store file another process holds
// says so at once in its log (the file, that another process holds it, how long it waits),
// and after that bounded wait ends with an error naming store.dir, the file and the fix,
// instead of hanging.
func TestServeSaysTheStoreIsLocked(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	file := filepath.Join(dir, "data", "loam.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o700))
	held, err := boltstore.Open(file, nil) // the other process
	require.NoError(t, err)
	defer held.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // liveness only
	defer cancel()
	var logs bytes.Buffer
	root := newRootFor(&cli{})
	root.SetArgs([]string{"--config", conf, "serve", "--log-level", "warn"})
	root.SetErr(&logs)
	root.SetOut(&logs)
	err = root.ExecuteContext(ctx)
	require.ErrorIs(t, err, boltstore.ErrLocked, "logs:\n%s", &logs)
	require.NoError(t, ctx.Err(), "serve ended on its own wait, not the test's deadline")
	require.ErrorContains(t, err, "store.dir "+filepath.Dir(file))
	require.ErrorContains(t, err, file+" is locked by another process")
	require.ErrorContains(t, err, "stop the process that holds it, or give this daemon a store.dir of its own")
	require.Contains(t, logs.String(), "locked by another process", "said while waiting")
	require.Contains(t, logs.String(), file)
	require.Contains(t, logs.String(), daemon.OwnLockWait.String())
}
