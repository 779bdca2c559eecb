package driver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/adapters"
)

// Retention bounds a log kept in a BlobStore: entries older than MaxAge and all but the
// newest MaxCount of each group are removed (zero: no bound of that kind).
type Retention struct {
	MaxAge   time.Duration
	MaxCount int
}

// Pruned says what one Prune removed.
type Pruned struct {
	Prefix  string
	Removed int
	Kept    int
}

// Prune applies r to the blobs under prefix, whose keys sort oldest first within a group:
// group(key) names the group a key counts in ("" for one group), at(key) its time when the
// key holds one. It deletes by version, so a blob rewritten meanwhile stays; it runs in the
// process that owns the store (store servers refuse remote deletes of the audit log).
func Prune(ctx context.Context, st adapters.BlobStore, prefix string, r Retention, now time.Time,
	group func(key string) string, at func(key string) (time.Time, bool)) (Pruned, error) {
	res := Pruned{Prefix: prefix}
	if r.MaxAge <= 0 && r.MaxCount <= 0 {
		return res, nil
	}
	blobs, err := st.ListBlobs(ctx, prefix)
	if err != nil {
		return res, fmt.Errorf("driver: retention of %s: %w", prefix, err)
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].Key < blobs[j].Key })
	byGroup := map[string][]adapters.Blob{}
	var order []string
	for _, b := range blobs {
		g := ""
		if group != nil {
			g = group(b.Key)
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], b)
	}
	for _, g := range order {
		bs := byGroup[g]
		for i, b := range bs {
			old := r.MaxCount > 0 && len(bs)-i > r.MaxCount
			if !old && r.MaxAge > 0 && at != nil {
				if t, ok := at(b.Key); ok && now.Sub(t) > r.MaxAge {
					old = true
				}
			}
			if !old {
				res.Kept++
				continue
			}
			if err := st.DeleteBlob(ctx, b.Key, b.Version); err != nil && !errors.Is(err, adapters.ErrConflict) {
				return res, fmt.Errorf("driver: retention of %s: deleting %s: %w", prefix, b.Key, err)
			}
			res.Removed++
		}
	}
	return res, nil
}

// AuditTime reads the time an audit entry's key holds (audit/<epoch>/<unix nanos>-...).
func AuditTime(key string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(key, AuditPrefix)
	if !ok {
		return time.Time{}, false
	}
	_, rest, ok = strings.Cut(rest, "/")
	if !ok || len(rest) < 20 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(rest[:20], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
