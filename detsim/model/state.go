package model

import (
	"fmt"
	"io"
	"maps"
	"slices"
)

// HashState writes everything about the backend that decides its future, canonically, for
// the explorer's state hash.
func (b *Backend) HashState(w io.Writer) {
	fmt.Fprintf(w, "B%s lsn=%d unsynced=%d", b.Name, b.lsn, len(b.unsynced))
	for _, k := range slices.Sorted(maps.Keys(b.rows)) {
		fmt.Fprintf(w, " %s=%v", k, b.rows[k])
	}
	for _, r := range slices.Sorted(maps.Keys(b.login)) {
		fmt.Fprintf(w, " login:%s=%v", r, b.login[r])
	}
	for _, id := range slices.Sorted(maps.Keys(b.sessions)) {
		fmt.Fprintf(w, " s%d=%v", id, b.sessions[id].alive)
	}
	for _, g := range slices.Sorted(maps.Keys(b.prepared)) {
		fmt.Fprintf(w, " p:%s", g)
	}
	for _, r := range b.Resolutions {
		fmt.Fprintf(w, " r:%s=%v", r.GID, r.Commit)
	}
	io.WriteString(w, "\n")
}

// HashState writes everything about the instance that decides its future.
func (r *Router) HashState(w io.Writer) {
	fmt.Fprintf(w, "R%s up=%v gen=%d", r.ID, r.Up(), r.gen)
	for _, db := range slices.Sorted(maps.Keys(r.routes)) {
		fmt.Fprintf(w, " %s=%v", db, r.routes[db])
	}
	for _, db := range slices.Sorted(maps.Keys(r.paused)) {
		fmt.Fprintf(w, " paused:%s", db)
	}
	for _, h := range r.held {
		fmt.Fprintf(w, " held:%s/%d", h.db, h.txn.ID)
	}
	for _, b := range slices.Sorted(maps.Keys(r.sess)) {
		fmt.Fprintf(w, " sess:%s=%d", b, r.sess[b])
	}
	for _, t := range r.tasks {
		fmt.Fprintf(w, " task%d:%s/%s/%v", t.ID, t.Status, t.Inner, t.cursor)
	}
	c := r.coord
	fmt.Fprintf(w, " coord:seq=%d", c.seq)
	for _, g := range slices.Sorted(maps.Keys(c.wal)) {
		fmt.Fprintf(w, " wal:%s=%v", g, c.wal[g].decided)
	}
	io.WriteString(w, "\n")
}
