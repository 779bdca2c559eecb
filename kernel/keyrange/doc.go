// Package keyrange is Vitess's keyspace-ID ranges, for the 8-byte keyspace IDs that the
// hash and xxhash vindexes produce.
//
// A shard of a sharded Vitess keyspace is named by the half-open range of keyspace IDs it
// holds: "-80" is [min, 0x80...), "80-" is [0x80..., end), "40-80" is [0x40..., 0x80...),
// and "-" (or the non-range name "0") is the whole space. Bounds are even-length hex,
// compared as if right-padded with zero bytes, so "80" and "8000" denote the same bound;
// a Range keeps the width it was written with so that it formats back to its name.
//
// Routing a row is Lookup on a Partition: the vindex turns the key into a keyspace ID and
// the partition finds the one shard whose range contains it, by binary search.
package keyrange
