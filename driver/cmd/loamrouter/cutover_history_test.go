package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/controller"
)

// TestFiledCutoverNeverRunsAgain: a controller that crashed while clearing a finished
// cutover (its outcome filed in the history, its snapshot removed, its request not yet)
// finds the request, sees it filed, and clears it without running the cutover again: no
// pause, no fence, no CUTOVER, and the filed outcome stays as it was.
func TestFiledCutoverNeverRunsAgain(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	w := newWorld()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	_, err = st.CAS(t.Context(), ref, 0, reshardingRecord())
	require.NoError(t, err)
	req := controller.CutoverRequest{Plan: cutoverPlanForTest(), By: "test", At: 1_700_000_000_000, From: 2}
	require.NoError(t, controller.PutJSON(t.Context(), st, controller.CutoverRequestKey(ref), 0, req))
	filed := controller.CutoverResult{Request: req, Outcome: "finalized", Generation: 3, Ended: 1_700_000_100_000}
	require.NoError(t, controller.PutJSON(t.Context(), st, controller.CutoverHistoryKey(ref, req.From), 0, filed))
	before, err := st.GetBlob(t.Context(), controller.CutoverHistoryKey(ref, req.From))
	require.NoError(t, err)
	require.NoError(t, st.Close())

	stop := serveIn(t, &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3")}, conf, nil)
	// The request is cleared: the status shows the filed outcome again, not a cutover running.
	require.Eventually(t, func() bool {
		out, err := cliRun(t, w, "--config", conf, "cutover", "status", "app", "--output", "json")
		var p controller.CutoverProgress
		return err == nil && json.Unmarshal([]byte(out), &p) == nil && p.Outcome == "finalized" && !p.Running
	}, 60*time.Second, 50*time.Millisecond)
	require.NoError(t, stop())

	st, err = boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.GetBlob(t.Context(), controller.CutoverRequestKey(ref))
	require.True(t, errors.Is(err, adapters.ErrNotFound), "the request is cleared (%v)", err)
	after, err := st.GetBlob(t.Context(), controller.CutoverHistoryKey(ref, req.From))
	require.NoError(t, err)
	require.Equal(t, before.Data, after.Data, "the filed outcome is kept as it was")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Zero(t, w.cutover, "no CUTOVER")
	require.Zero(t, w.fences, "no fence")
	require.Empty(t, w.paused, "no pause")
}
