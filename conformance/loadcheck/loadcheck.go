// Package loadcheck holds the checks the real cutover tests make of what a write load
// (refrouter.Write) left on the shards: which databases hold each row (Stored), that every
// acknowledged write is stored exactly once, on the shard its key hashes to (ExactlyOnce),
// and that the writes of an instance cut off from the controller were refused while the
// source was fenced (Stale). The reference routers' cutover tests (refrouter) and the real
// PgDog ones (adapters/pgdog) share them; the rows are those of table t (id bigint, worker
// int, seq bigint, router text).
package loadcheck

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/refrouter"
)

// Stored reads every row of table t on databases dbs of s: id -> the indexes (in dbs) of
// the databases holding it, and id -> its router column.
func Stored(t testing.TB, s *pgtest.Server, dbs []string) (map[int64][]int, map[int64]string) {
	t.Helper()
	where, by := map[int64][]int{}, map[int64]string{}
	for i, db := range dbs {
		c := s.Connect(t, db)
		rs, err := c.Query(context.Background(), "SELECT id, router FROM t")
		require.NoError(t, err, "reading table t of %s", db)
		for rs.Next() {
			var id int64
			var router string
			require.NoError(t, rs.Scan(&id, &router))
			where[id] = append(where[id], i)
			by[id] = router
		}
		require.NoError(t, rs.Err())
		c.Close(context.Background())
	}
	return where, by
}

// ExactlyOnce checks where (from Stored, over the n shards of the layout in force) against
// the writes of the load: every acknowledged write is stored exactly once, on the shard its
// key hashes to; every stored row comes from a write of the load; and, when refused is not
// nil, from none that refused(w) says was refused. It returns how many acknowledged writes
// are missing (lost), or an error naming the first write or row that breaks the rest.
func ExactlyOnce(where map[int64][]int, writes []refrouter.Write, n int, refused func(refrouter.Write) bool) (int, error) {
	byKey := map[int64]refrouter.Write{}
	lost := 0
	for _, w := range writes {
		byKey[w.Key] = w
		if !w.Acked() {
			continue
		}
		got := where[w.Key]
		if len(got) == 0 {
			lost++
			continue
		}
		if want := int(pghash.ShardOfInt8(w.Key, uint64(n))); len(got) != 1 || got[0] != want {
			return lost, fmt.Errorf("acknowledged write %d (via %s) is stored on shards %v, want exactly once on shard %d", w.Key, w.Router, got, want)
		}
	}
	for id := range where {
		w, ok := byKey[id]
		if !ok {
			return lost, fmt.Errorf("row %d comes from no write of the load", id)
		}
		if refused != nil && refused(w) {
			return lost, fmt.Errorf("row %d comes from a write that was refused (%v)", id, w.Err)
		}
	}
	return lost, nil
}

// Stale checks the writes of router, an instance that kept routing to the source: each one
// made inside the fence window (started after from, ended before until; until zero: never
// released) was refused (refused(w)) and did not land on the source (srcWhere and srcBy from
// Stored on the source). Writes cancelled by the load's end are left out. It returns how
// many writes were inside the window and how many of router's writes were refused in all,
// or an error naming the first write that breaks it.
func Stale(writes []refrouter.Write, router string, from, until time.Time, srcWhere map[int64][]int, srcBy map[int64]string, refused func(refrouter.Write) bool) (inside, refusedAll int, err error) {
	if from.IsZero() {
		return 0, 0, errors.New("the source was never fenced")
	}
	for _, w := range writes {
		if w.Router != router {
			continue
		}
		if refused(w) {
			refusedAll++
		}
		if !w.Start.After(from) || !until.IsZero() && !w.Start.Add(w.Latency).Before(until) || errors.Is(w.Err, context.Canceled) {
			continue
		}
		if !refused(w) {
			return inside, refusedAll, fmt.Errorf("%s's write %d started %v after the fence (released %v after it), took %v and was not refused: %v",
				router, w.Key, w.Start.Sub(from), until.Sub(from), w.Latency, w.Err)
		}
		if srcBy[w.Key] == router && len(srcWhere[w.Key]) > 0 {
			return inside, refusedAll, fmt.Errorf("%s's write %d landed on the source after the fence", router, w.Key)
		}
		inside++
	}
	return inside, refusedAll, nil
}
