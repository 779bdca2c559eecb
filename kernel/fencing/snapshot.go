package fencing

import (
	"maps"
	"slices"
)

// Entry is one key's value and its expiry deadline in milliseconds (0: never expires).
type Entry struct {
	Value     string
	ExpiresAt int64
}

// Snapshot is the part of a server's keyspace the scripts touch: key to entry. It stands for
// the server while a script runs, so Apply mutates it in place as the script would.
type Snapshot map[string]Entry

// Get returns the value of key if it is live at now. A key whose deadline has passed is
// gone, as a script on the server would see it.
func (s Snapshot) Get(key string, now int64) (string, bool) {
	e, ok := s[key]
	if !ok || e.ExpiresAt != 0 && now >= e.ExpiresAt {
		return "", false
	}
	return e.Value, true
}

// Expire deletes every key whose deadline is at or before now, as the server's expiry does,
// so that a snapshot compares equal to the keys a server would list at now.
func (s Snapshot) Expire(now int64) {
	maps.DeleteFunc(s, func(_ string, e Entry) bool { return e.ExpiresAt != 0 && now >= e.ExpiresAt })
}

// Clone returns an independent copy.
func (s Snapshot) Clone() Snapshot { return maps.Clone(s) }

// Keys returns the keys in sorted order.
func (s Snapshot) Keys() []string { return slices.Sorted(maps.Keys(s)) }
