package driver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
)

// TestPruneAudit: entries past the age and all but the newest MaxCount go; the newest stay
// and still read back in order; an entry rewritten meanwhile would stay (deletes by version).
func TestPruneAudit(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	now := time.Now()
	key := func(epoch int, at time.Time) string {
		return fmt.Sprintf("%s%020d/%020d-000001-abcdef", driver.AuditPrefix, epoch, at.UnixNano())
	}
	var keys []string
	for i := range 10 {
		at := now.Add(-time.Duration(10-i) * time.Hour) // 10h ago ... 1h ago
		k := key(1+i/5, at)
		keys = append(keys, k)
		_, err := st.PutBlob(ctx, k, 0, fmt.Appendf(nil, `{"event":"action","what":"e%d","at":%d}`, i, at.UnixMilli()))
		require.NoError(t, err)
	}
	tm, ok := driver.AuditTime(keys[3])
	require.True(t, ok)
	require.Equal(t, now.Add(-7*time.Hour).UnixNano(), tm.UnixNano())

	res, err := driver.Prune(ctx, st, driver.AuditPrefix, driver.Retention{MaxAge: 5*time.Hour + 30*time.Minute}, now, nil, driver.AuditTime)
	require.NoError(t, err)
	require.Equal(t, 5, res.Removed, "entries 10h..6h ago are past 5h30m")
	res, err = driver.Prune(ctx, st, driver.AuditPrefix, driver.Retention{MaxCount: 3}, now, nil, driver.AuditTime)
	require.NoError(t, err)
	require.Equal(t, driver.Pruned{Prefix: driver.AuditPrefix, Removed: 2, Kept: 3}, res)
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{})
	require.NoError(t, err)
	var whats []string
	for _, e := range entries {
		whats = append(whats, e.What)
	}
	require.Equal(t, []string{"e7", "e8", "e9"}, whats, "the newest three, in log order")
}

// TestPruneHistoryByGroup: a count bound applies per group (a database's cutovers), so a
// busy database does not push out a quiet one's history.
func TestPruneHistoryByGroup(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	for _, db := range []string{"default/a", "default/b"} {
		n := 5
		if db == "default/b" {
			n = 2
		}
		for g := range n {
			_, err := st.PutBlob(ctx, fmt.Sprintf("history/cutover/%s/%020d", db, g+1), 0, []byte("{}"))
			require.NoError(t, err)
		}
	}
	res, err := driver.Prune(ctx, st, "history/", driver.Retention{MaxCount: 2}, time.Now(), path.Dir, func(string) (time.Time, bool) { return time.Time{}, false })
	require.NoError(t, err)
	require.Equal(t, 3, res.Removed)
	bs, err := st.ListBlobs(ctx, "history/")
	require.NoError(t, err)
	var got []string
	for _, b := range bs {
		got = append(got, b.Key[len("history/cutover/"):])
	}
	require.Equal(t, []string{"default/a/" + pad(4), "default/a/" + pad(5), "default/b/" + pad(1), "default/b/" + pad(2)}, got)
}

func pad(n int) string { return fmt.Sprintf("%020s", strconv.Itoa(n)) }

// TestReadAuditNewestPages: the last entries of a log behind a store server are read
// newest-first, a page at a time: the last three of fifty cost one page, not ten.
func TestReadAuditNewestPages(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a := driver.NewAudit(st, func() driver.Token { return driver.Token{Holder: "t", Epoch: 1} }, nil)
	for i := range 50 {
		require.NoError(t, a.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, What: fmt.Sprint("e", i)}))
	}
	lists := 0
	opts := &httpstore.Options{
		Credentials: []httpstore.Credential{{Name: "t", Role: httpstore.RoleOperator, Token: "test-token-0123456789"}},
		Authorize: func(_ httpstore.Identity, a *httpstore.Access) error {
			if a.Op == "list" {
				lists++
			}
			return nil
		},
		PageSize: 5,
	}
	srv := httptest.NewServer(httpstore.Handler(st, opts))
	defer srv.Close()
	c, err := httpstore.Dial(srv.URL, &httpstore.Options{Token: "test-token-0123456789"})
	require.NoError(t, err)
	entries, err := driver.ReadAudit(ctx, c, driver.AuditFilter{Limit: 3})
	require.NoError(t, err)
	require.Equal(t, 1, lists)
	require.Len(t, entries, 3)
	require.Equal(t, []string{"e47", "e48", "e49"}, []string{entries[0].What, entries[1].What, entries[2].What})
	lists = 0
	entries, err = driver.ReadAudit(ctx, c, driver.AuditFilter{Limit: 12})
	require.NoError(t, err)
	require.Equal(t, 3, lists)
	require.Equal(t, "e38", entries[0].What)
	all, err := driver.ReadAudit(ctx, c, driver.AuditFilter{})
	require.NoError(t, err)
	require.Len(t, all, 50)
}
