// Package shardmap is the shard map record: for one mapped database, which shards exist,
// which backend each one is, how a key picks its shard, and where a reshard is in its life.
// It is the control plane's truth (the routers' own files are rendered from it), kept in a
// ShardMapStore and changed only by compare-and-set on Version.
//
// Two numbers matter and they are different on purpose. Version counts writes to the
// record, so CAS can detect a lost update. Generation counts routing changes: a router
// instance that has applied generation g routes by g's shard list, and generations are
// never reused, so "instance X is on g" means one thing for ever.
//
// Validate checks a record on its own and names every problem with the exact field
// ("scheme.ranges[2].start: ..."); ValidateNext checks a change from one record to the next
// (a generation never goes backwards; routing never changes without a new generation).
//
// The record has two encodings. The binary one (MarshalBinary) is what stores keep: a
// format byte first, then a fixed field order, deterministic, so equal records give equal
// bytes; an unknown format byte is an error, never a guess. JSON (MarshalJSON) is for
// people and for `loamrouter map apply`.
package shardmap
