package loadcheck_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance/loadcheck"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/refrouter"
)

func shardOf(k int64) int { return int(pghash.ShardOfInt8(k, 3)) }

func TestExactlyOnce(t *testing.T) {
	fenced := refrouter.Write{Key: 3, Router: "b", Err: adapters.ErrFenced}
	writes := []refrouter.Write{{Key: 1, Router: "a"}, {Key: 2, Router: "a"}, fenced}
	ok := map[int64][]int{1: {shardOf(1)}, 2: {shardOf(2)}}

	lost, err := loadcheck.ExactlyOnce(ok, writes, 3, refrouter.Write.Fenced)
	require.NoError(t, err)
	require.Zero(t, lost)

	lost, err = loadcheck.ExactlyOnce(map[int64][]int{1: {shardOf(1)}}, writes, 3, refrouter.Write.Fenced)
	require.NoError(t, err)
	require.Equal(t, 1, lost, "write 2 is acknowledged and missing")

	_, err = loadcheck.ExactlyOnce(map[int64][]int{1: {shardOf(1), shardOf(1)}, 2: {shardOf(2)}}, writes, 3, nil)
	require.ErrorContains(t, err, "acknowledged write 1", "stored twice")

	_, err = loadcheck.ExactlyOnce(map[int64][]int{1: {(shardOf(1) + 1) % 3}, 2: {shardOf(2)}}, writes, 3, nil)
	require.ErrorContains(t, err, "acknowledged write 1", "stored on another shard")

	_, err = loadcheck.ExactlyOnce(map[int64][]int{1: {shardOf(1)}, 2: {shardOf(2)}, 9: {0}}, writes, 3, nil)
	require.ErrorContains(t, err, "row 9 comes from no write")

	withFenced := map[int64][]int{1: {shardOf(1)}, 2: {shardOf(2)}, 3: {shardOf(3)}}
	_, err = loadcheck.ExactlyOnce(withFenced, writes, 3, refrouter.Write.Fenced)
	require.ErrorContains(t, err, "row 3 comes from a write that was refused")
	_, err = loadcheck.ExactlyOnce(withFenced, writes, 3, nil)
	require.NoError(t, err, "without refused, a refused write's row is allowed")
}

func TestStale(t *testing.T) {
	from := time.Unix(1000, 0)
	until := from.Add(10 * time.Second)
	at := func(d time.Duration) time.Time { return from.Add(d) }
	writes := []refrouter.Write{
		{Key: 1, Router: "s", Start: at(-time.Second), Latency: time.Millisecond},                         // before the fence
		{Key: 2, Router: "s", Start: at(time.Second), Latency: time.Millisecond, Err: adapters.ErrFenced}, // inside, refused
		{Key: 3, Router: "s", Start: at(9 * time.Second), Latency: 2 * time.Second},                       // ends after the release
		{Key: 4, Router: "s", Start: at(2 * time.Second), Err: context.Canceled},                          // the load's end
		{Key: 5, Router: "o", Start: at(time.Second), Latency: time.Millisecond},                          // another instance
	}
	inside, refused, err := loadcheck.Stale(writes, "s", from, until, nil, nil, refrouter.Write.Fenced)
	require.NoError(t, err)
	require.Equal(t, 1, inside)
	require.Equal(t, 1, refused)

	accepted := append(writes, refrouter.Write{Key: 6, Router: "s", Start: at(3 * time.Second), Latency: time.Millisecond})
	_, _, err = loadcheck.Stale(accepted, "s", from, until, nil, nil, refrouter.Write.Fenced)
	require.ErrorContains(t, err, "write 6", "a write inside the window that was not refused")
	_, _, err = loadcheck.Stale(accepted, "s", from, time.Time{}, nil, nil, refrouter.Write.Fenced)
	require.ErrorContains(t, err, "write 3", "never released: the long write is inside too")

	landed := append(writes[:0:0], writes...)
	landed[1].Err = errors.New("refused, but committed")
	_, _, err = loadcheck.Stale(landed, "s", from, until, map[int64][]int{2: {0}}, map[int64]string{2: "s"}, func(w refrouter.Write) bool { return w.Err != nil })
	require.ErrorContains(t, err, "write 2 landed on the source")

	_, _, err = loadcheck.Stale(writes, "s", time.Time{}, until, nil, nil, refrouter.Write.Fenced)
	require.ErrorContains(t, err, "never fenced")
}
