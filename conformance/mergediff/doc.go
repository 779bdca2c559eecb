// Package mergediff is the differential test of loam.dev/router/kernel/merge against
// Postgres itself (§14.2 of the design): a seeded stream of queries (multi-key ORDER BY with
// NULLs, LIMIT/OFFSET, COUNT/SUM/MIN/MAX/AVG with and without GROUP BY) runs on one
// unsharded Postgres holding every row and, per shard, on N Postgres servers holding the rows
// split by kernel/pghash; the shards' answers combined by kernel/merge must equal the
// unsharded answer.
//
// The package holds the stream and the comparison so other differential tests (a router in
// front of the shards) can replay the same queries: Rows and Schema make the data, Generate
// the queries, Query.ShardSQL what each shard runs, Query.Combine the merge, and Query.Check
// the verdict. Check compares in exact order where the ORDER BY is total (it ends in the
// unique id); otherwise it compares the sequence of sort keys and, within each run of rows
// that tie on every key, the rows as a multiset, except that a run cut by LIMIT/OFFSET only
// needs its rows to be among the unsharded answer's rows of that run (Postgres may return
// any of them).
//
// Values come back in text format (the simple protocol) and are read by their type OID
// (Decode): integers, numeric with its display scale, text, and booleans as Postgres prints
// them ("t"/"f"). Text columns are COLLATE "C", as kernel/merge compares text bytewise.
// Floats are not used: see kernel/merge.
package mergediff
