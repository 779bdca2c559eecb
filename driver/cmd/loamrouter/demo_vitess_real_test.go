package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/vitesstest"
)

// TestRealVitessDemo runs `loamrouter demo --vitess` to its report on a real Vitess: the
// controller reshards keyspace demo 0 -> -80,80- under writes through vtgate, the Reshard
// completes, every acknowledged row is on the shard the record locates it on, none is lost,
// and the demo's directory is gone afterwards.
func TestRealVitessDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Vitess; not in -short")
	}
	var out strings.Builder
	r, err := runVitessDemo(t.Context(), &out, demoOptions{steady: time.Second, workers: 2})
	if errors.Is(err, errNoVitess) {
		if os.Getenv(vitesstest.EnvRequireReal) == "1" {
			t.Fatalf("%s=1 but %v", vitesstest.EnvRequireReal, err)
		}
		t.Skip(err.Error())
	}
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())
	require.Equal(t, "completed", r.Outcome)
	require.Zero(t, r.Lost, "acknowledged writes lost")
	require.Zero(t, r.Misplaced, "acknowledged rows on another shard than the record locates")
	require.Greater(t, r.Acked, 1000, "the load went on through the reshard")
	require.Len(t, r.Shards, 2)
	for _, s := range r.Shards {
		require.Equal(t, s.WantRows, s.Rows, "shard %s", s.Shard)
		require.Equal(t, s.WantSum, s.Sum, "shard %s", s.Shard)
		require.NotZero(t, s.Rows, "shard %s", s.Shard)
	}
	require.Greater(t, r.Copy, time.Duration(0))
	require.Contains(t, out.String(), "the record at generation")
	require.Contains(t, out.String(), "serves -80,80-")
	for _, line := range strings.Split(out.String(), "\n") {
		if dir, ok := strings.CutPrefix(line, "kept "); ok {
			t.Fatalf("the demo kept %s without --keep", dir)
		}
	}
}

// TestVitessDemoNeedsBinaries: without the Vitess programs `demo --vitess` fails at once,
// saying which environment variable names them and how to build them.
func TestVitessDemoNeedsBinaries(t *testing.T) {
	t.Setenv(vitesstest.EnvBinDir, "")
	root := newRootFor(&cli{})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"demo", "--vitess"})
	start := time.Now()
	err := root.ExecuteContext(t.Context())
	require.ErrorIs(t, err, errNoVitess)
	require.ErrorContains(t, err, "set LOAM_VITESS_BIN to the directory holding vtctld")
	require.ErrorContains(t, err, "vitessbin/build.sh")
	require.NotContains(t, out.String(), "==> starting", "nothing was started")
	require.Less(t, time.Since(start), time.Minute)
}
