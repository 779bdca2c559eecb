package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/kernel/shardmap"
)

// TestFailoverThroughTheDaemon: `failover --wait` asks the controller to repoint s1; the old
// primary is fenced, the record names the promoted primary at a new generation, every
// router reloads it, and the outcome comes back to the command.
func TestFailoverThroughTheDaemon(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	w := newWorld()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	rec := reshardingRecord()
	rec.State, rec.Target = shardmap.State{Phase: shardmap.Serving}, nil
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, rec)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	serveIn(t, &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3")}, conf, nil)
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.gen["pgdog-3"] == 2
	}, 60*time.Second, 20*time.Millisecond, "ConfigPush moves the routers to generation 2")

	_, err = cliRun(t, w, "--config", conf, "failover", "app", "--shard", "s9", "--to", "127.0.0.1:6002")
	require.ErrorContains(t, err, `has no shard "s9"`)
	out, err := cliRun(t, w, "--config", conf, "failover", "app", "--shard", "s1", "--to", "127.0.0.1:6002", "--wait", "20s")
	require.NoError(t, err, out)
	require.Contains(t, out, "failover of s1: repointed at generation 3 (old primary fenced: true)")

	w.mu.Lock()
	fenced := w.fenced["127.0.0.1:5002"]
	w.mu.Unlock()
	require.True(t, fenced, "the old primary is fenced")
	// The failover ends once ConfigPush has taken the new generation; the reloads follow.
	for _, id := range []string{"pgdog-1", "pgdog-2", "pgdog-3"} {
		require.Eventually(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.gen[id] == 3
		}, 30*time.Second, 20*time.Millisecond, "%s reloaded the new generation", id)
	}
	out, err = cliRun(t, w, "--config", conf, "map", "show", "app")
	require.NoError(t, err)
	var got shardmap.Record
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, uint16(6002), got.Shards[1].Backend.Port)
	require.Equal(t, uint64(3), got.Generation)
	out, err = cliRun(t, w, "--config", conf, "audit", "--machine", "failover")
	require.NoError(t, err)
	require.True(t, strings.Contains(out, "FenceOld") && strings.Contains(out, "failover of s1 ended: repointed"), out)
}
