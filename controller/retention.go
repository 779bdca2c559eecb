package controller

import (
	"context"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
)

// Prune applies [retention] once: the audit log by age and count, the histories by count
// per database and kind, and failovers' by age too (their keys hold the time).
func Prune(ctx context.Context, st adapters.BlobStore, r RetentionConfig, now time.Time, log *slog.Logger) {
	for _, p := range []struct {
		prefix string
		r      driver.Retention
		group  func(string) string
		at     func(string) (time.Time, bool)
	}{
		{driver.AuditPrefix, driver.Retention{MaxAge: r.AuditMaxAge.Duration, MaxCount: r.AuditMaxCount}, nil, driver.AuditTime},
		{"history/", driver.Retention{MaxAge: r.HistoryMaxAge.Duration, MaxCount: r.HistoryMaxCount}, path.Dir, historyTime},
	} {
		res, err := driver.Prune(ctx, st, p.prefix, p.r, now, p.group, p.at)
		switch {
		case err != nil:
			log.Warn("retention: pruning failed; trying again next round", "prefix", p.prefix, "err", err)
		case res.Removed > 0:
			log.Info("retention: pruned", "prefix", p.prefix, "removed", res.Removed, "kept", res.Kept)
		}
	}
}

// historyTime is a failover history's time (history/failover/<ns>/<db>/<unix ms>); a
// cutover's key holds its generation, not a time.
func historyTime(key string) (time.Time, bool) {
	if !strings.HasPrefix(key, "history/failover/") {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(path.Base(key), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// KeepPruning prunes at once and every r.Every until ctx ends.
func KeepPruning(ctx context.Context, st adapters.BlobStore, r RetentionConfig, log *slog.Logger) {
	t := time.NewTicker(r.Every.Duration)
	defer t.Stop()
	for {
		Prune(ctx, st, r, time.Now(), log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
