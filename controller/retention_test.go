package controller

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
)

// TestRetention: [retention] bounds the audit log and the histories as configured: an old
// failover's history goes by age, a cutover history past the count, and the newest stay.
func TestRetention(t *testing.T) {
	cfg, err := ParseConfig("loam.toml", []byte("[retention]\naudit_max_count = 2\nhistory_max_count = 2\nhistory_max_age = \"24h\"\n"))
	require.NoError(t, err)
	require.Equal(t, 720*time.Hour, cfg.Retention.AuditMaxAge.Duration, "default")
	st := memstore.New()
	ctx := t.Context()
	now := time.Now()
	a := driver.NewAudit(st, func() driver.Token { return driver.Token{Holder: "t"} }, nil)
	for i := range 4 {
		require.NoError(t, a.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, What: fmt.Sprint("e", i)}))
	}
	put := func(k string) {
		_, err := st.PutBlob(ctx, k, 0, []byte("{}"))
		require.NoError(t, err)
	}
	put(fmt.Sprintf("history/failover/default/app/%020d", now.Add(-48*time.Hour).UnixMilli()))
	put(fmt.Sprintf("history/failover/default/app/%020d", now.Add(-time.Hour).UnixMilli()))
	for g := 1; g <= 3; g++ {
		put(fmt.Sprintf("history/cutover/default/app/%020d", g))
	}
	Prune(ctx, st, cfg.Retention, now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, "e2", entries[0].What)
	bs, err := st.ListBlobs(ctx, "history/")
	require.NoError(t, err)
	var keys []string
	for _, b := range bs {
		keys = append(keys, b.Key)
	}
	require.Equal(t, []string{
		fmt.Sprintf("history/cutover/default/app/%020d", 2), fmt.Sprintf("history/cutover/default/app/%020d", 3),
		fmt.Sprintf("history/failover/default/app/%020d", now.Add(-time.Hour).UnixMilli()),
	}, keys)
}
