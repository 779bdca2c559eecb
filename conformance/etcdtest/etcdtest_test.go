package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeT records what require did.
type fakeT struct{ skipped, failed string }

func (f *fakeT) Helper()             {}
func (f *fakeT) Skip(a ...any)       { f.skipped = fmt.Sprint(a...) }
func (f *fakeT) Fatal(a ...any)      { f.failed = fmt.Sprint(a...) }
func missingBinary() (string, error) { return "", errors.New("etcd not on PATH") }

// TestRequireSkipsOrFails: without a binary the test skips with "skipped: needs etcd", and
// fails instead under LOAM_REQUIRE_REAL=1.
func TestRequireSkipsOrFails(t *testing.T) {
	t.Setenv(EnvRequireReal, "")
	var f fakeT
	require.Empty(t, require_(&f))
	require.Contains(t, f.skipped, "skipped: needs etcd")
	require.Empty(t, f.failed)
	t.Setenv(EnvRequireReal, "1")
	f = fakeT{}
	require_(&f)
	require.Contains(t, f.failed, "LOAM_REQUIRE_REAL=1: skipped: needs etcd")
	require.Empty(t, f.skipped)
}

func require_(f *fakeT) string { return requireBinary(f, missingBinary) }

func TestSingleMember(t *testing.T) {
	c := Start(t, 1)
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := cl.Put(ctx, "k", "v")
	require.NoError(t, err)
	l, err := c.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, c.Members[0], l)
}

// TestThreeMembersLoseAndRegainLeader: killing the leader elects another among the two
// left; stopping a second loses quorum (no linearizable read); restarting one brings the
// quorum and the data back.
func TestThreeMembersLoseAndRegainLeader(t *testing.T) {
	c := Start(t, 3)
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, err := cl.Put(ctx, "k", "v1")
	require.NoError(t, err)
	old, err := c.Leader(ctx)
	require.NoError(t, err)
	old.Kill()
	require.NoError(t, c.WaitHealthy(ctx))
	next, err := c.Leader(ctx)
	require.NoError(t, err)
	require.NotEqual(t, old, next)
	_, err = cl.Put(ctx, "k", "v2")
	require.NoError(t, err)

	next.Stop()
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = cl.Get(wctx, "k")
	wcancel()
	require.Error(t, err, "one member of three must not answer a linearizable read")

	require.NoError(t, old.Restart())
	require.NoError(t, c.WaitHealthy(ctx))
	got, err := cl.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v2", string(got.Kvs[0].Value))
	require.NoError(t, next.Restart())
	require.NoError(t, c.WaitHealthy(ctx))
}

// TestPauseResume: a paused follower does not stop the other two; resumed, it catches up.
func TestPauseResume(t *testing.T) {
	c := Start(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	l, err := c.Leader(ctx)
	require.NoError(t, err)
	cl := ClientOf(t, l)
	var f *Member
	for _, m := range c.Members {
		if m != l {
			f = m
			break
		}
	}
	require.NoError(t, f.Pause())
	_, err = cl.Put(ctx, "k", "while-paused")
	require.NoError(t, err)
	require.NoError(t, f.Resume())
	require.NoError(t, c.WaitHealthy(ctx))
	f.Kill()
	require.ErrorIs(t, f.Pause(), ErrNotRunning)
}
