package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/tikv"
	"loam.dev/router/adapters/tikv/tikvtest"
	"loam.dev/router/kernel/shardmap"
)

// TestDaemonOnTiKV runs the controller on client-go's in-process TiKV instead of the
// embedded store (store.kind = "tikv" reaches a real cluster the same way): the lease, the
// watch by polling, ConfigPush to every router, and a failover through the record's
// compare-and-set in one optimistic transaction.
func TestDaemonOnTiKV(t *testing.T) {
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_COPY_PW", "copy-pw")
	setTestTokens(t)
	st, err := tikvtest.New(&tikv.Options{PollMin: 2 * time.Millisecond, PollMax: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	w := newWorld()
	rec := reshardingRecord()
	rec.State, rec.Target = shardmap.State{Phase: shardmap.Serving}, nil
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	_, err = st.CAS(t.Context(), ref, 0, rec)
	require.NoError(t, err)

	mk := func() *cli { return &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3"), store: st} }
	serveIn(t, mk(), conf, nil)
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.gen["pgdog-1"] == 2 && w.gen["pgdog-2"] == 2 && w.gen["pgdog-3"] == 2
	}, 10*time.Second, 20*time.Millisecond, "ConfigPush through the TiKV watch")

	cmd := newRootFor(mk())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--config", conf, "failover", "app", "--shard", "s0", "--to", "127.0.0.1:7001", "--wait", "20s"})
	require.NoError(t, cmd.ExecuteContext(t.Context()), out.String())
	require.Contains(t, out.String(), "repointed at generation 3")
	got, err := st.Read(t.Context(), ref)
	require.NoError(t, err)
	require.Equal(t, uint16(7001), got.Shards[0].Backend.Port)
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.gen["pgdog-3"] == 3
	}, 10*time.Second, 20*time.Millisecond)
	lease, err := st.GetBlob(t.Context(), "lease/controller")
	require.NoError(t, err)
	var l struct{ Holder string }
	require.NoError(t, json.Unmarshal(lease.Data, &l))
	require.Equal(t, "ctl-test", l.Holder)
}
