// Package merge is the reference semantics of cross-shard results: what a router must return
// when one query ran on every shard and the per-shard answers are combined. It is never on a
// routing path (PgDog and Vitess do the real merging); it is the yardstick the differential
// tests hold them to: a query runs on one unsharded Postgres and, split by the routing
// function, on N shards, and the shards' answers combined here must equal the unsharded answer.
// The proved oracle (proof/: the design's Lean oracle of §12, in Coq) implements the same
// functions, extracted from their proofs, and is compared with this package through the
// JSON-lines protocol below (TestMatchesProvedOracle).
//
// Three things are defined:
//
//   - Merge: a k-way merge of per-shard sorted rows under a multi-column ORDER BY (ASC/DESC,
//     NULLS FIRST/LAST with Postgres's defaults), with LIMIT/OFFSET. Its answer is exactly
//     "concatenate the shards in index order, sort stably, apply OFFSET and LIMIT": rows that
//     tie on every key keep shard order. Limit.PerShard says what each shard must be asked for.
//   - Decompose/Combine: COUNT(*), COUNT, SUM, MIN, MAX and AVG (as SUM and COUNT) with GROUP BY,
//     as per-shard partial aggregates and their final combination. COUNT(DISTINCT) and other
//     aggregates partials cannot produce are a *NotDecomposableError naming the aggregate.
//   - CheckPartition/CheckModulus: whether ranges or hash remainders assigned to shards cover a
//     key space exactly once (see Finding for the definition).
//
// # Values and why they are exact
//
// A Value is NULL, a boolean, an exact decimal number or text, which is what the differential
// query stream uses (int2/int4/int8, numeric, text, bool) and what can be compared with Postgres
// without tolerance. Postgres returns numeric for SUM(int8) and for every AVG of integers or
// numerics, so sums never overflow here, and AVG is divided as Postgres's numeric_div divides
// (at least 16 significant digits, rounded half away from zero): AVG(1, 2) is
// 1.5000000000000000, not 1.5. The semantics follow Postgres with COLLATE "C":
//
//   - ORDER BY: text compares bytewise; numbers by value (1.0 = 1); false < true; NULLS LAST is
//     the default for ASC and NULLS FIRST for DESC. Shard queries compared with this package
//     must sort text, and take MIN/MAX of it, under COLLATE "C" too.
//   - Aggregates ignore NULLs. COUNT of no rows is 0; SUM, MIN, MAX and AVG of no rows (or of
//     only NULLs) are NULL. A SUM shows the largest display scale of its inputs.
//   - GROUP BY puts all NULLs in one group and groups numbers by value. Without GROUP BY an
//     aggregation returns exactly one row, even over no rows.
//
// Floats are left out on purpose: float8 sums depend on the order of addition, so a sharded
// AVG(float8) cannot equal the unsharded one bit for bit. Two places where Postgres itself
// depends on scan order are pinned to one choice and should be compared by value, not by
// display, when they matter: MIN/MAX among numerically equal numbers of different display
// scale (1.0 vs 1.00; Postgres keeps the last one its scan sees, this package the last in shard
// order, then row order), and which display of such numbers names their GROUP BY group (here:
// the first seen).
//
// # The protocol
//
// Serve reads one JSON request per line and writes one JSON response per line, in order; blank
// lines get no response. Respond does the same for one line in memory. Responses are canonical
// (keys in the order shown, no spaces, strings escaped minimally: '"' and '\' with a backslash,
// control characters as \b \f \n \r \t or \u00XX with lower-case hex, everything else as UTF-8),
// so two implementations can be compared line by line; comparing the parsed JSON is equally
// valid. AppendRequest writes requests in the same canonical form.
//
// Values are encoded as JSON: null is NULL, true and false are booleans, a string is text, and a
// number literal is an exact number (within Postgres's numeric limits: 131072 digits before the
// point, 16383 after): its digits after the point are its display scale ("1.50" is numeric 1.50, equal to 1.5 but shown with two decimals). Exponents ("1e3")
// are refused, because they would leave the display scale ambiguous, and no JSON parser that
// reads numbers as float64 may be used on either side. Responses write numbers as Postgres
// prints them: integers plain, decimals with exactly their display scale.
//
// merge. "order" (required, may be empty) lists keys: "col" (required, a column index from 0),
// "dir" ("asc", the default, or "desc"), "nulls" ("first" or "last"; absent means Postgres's
// default). "limit" is an integer from 0 to 2^63-1, or null or absent for none; "offset"
// an integer from 0 to 2^63-1, default 0. "shards" lists each shard's rows, each row a list of values, each shard sorted by
// "order". The answer is the stable sort of the concatenation with OFFSET and LIMIT applied;
// "from" gives each answer row's shard; "shard_limit" is what every shard must be asked for:
// limit + offset; 0 when limit is 0; null without a limit or when the sum passes 2^63-1.
//
//	{"op":"merge","order":[{"col":0,"dir":"desc"},{"col":1}],"limit":2,"offset":1,"shards":[[[3,"a"],[1,"b"]],[[null,"d"],[2,"c"]]]}
//	{"ok":true,"rows":[[3,"a"],[2,"c"]],"from":[0,1],"shard_limit":3}
//
// aggregate. "group_by" (default []) lists group columns; "aggs" (required) lists aggregates
// {"fn":…,"col":…,"distinct":…}, fn one of count, sum, min, max, avg; count without col is
// COUNT(*); distinct defaults to false. "input" is "rows" (shards hold raw rows) or
// "partials" (shards hold what the per-shard query returned: the group columns, then the
// partials). The answer has one row per group (group columns, then the aggregates), ordered by
// the group columns ascending with NULLs last. "partials" is the per-shard select list after
// the group columns, by this rule: for each aggregate in order, COUNT(*) needs count(*), COUNT(c)
// count(c), SUM(c) sum(c), MIN(c) min(c), MAX(c) max(c), AVG(c) sum(c) then count(c); a partial
// already listed is not listed again.
//
//	{"op":"aggregate","group_by":[0],"aggs":[{"fn":"count"},{"fn":"avg","col":1}],"input":"rows","shards":[[["a",1],["b",null]],[["a",2]]]}
//	{"ok":true,"rows":[["a",2,1.5000000000000000],["b",1,null]],"partials":[{"fn":"count"},{"fn":"sum","col":1},{"fn":"count","col":1}]}
//	{"op":"aggregate","aggs":[{"fn":"sum","col":0},{"fn":"max","col":0}],"input":"partials","shards":[[[9223372036854775807,9223372036854775807]],[[1,1]],[[null,null]]]}
//	{"ok":true,"rows":[[9223372036854775808,9223372036854775807]],"partials":[{"fn":"sum","col":0},{"fn":"max","col":0}]}
//
// partition_check. Either "space" [lo, hi] and "parts", each part a list of ranges [lo, hi]
// (half-open [lo, hi), lo < hi, integers of up to 1000 digits), or "modulus" m and "parts", each part a
// list of remainders (remainder r is the range [r, r+1) of the space [0, m)). The answer follows
// Finding: "partition" true; or false with "empty_part", the lowest part with no range; or
// false with "at", the smallest integer covered a wrong number of times, and "owners", the part
// of every range covering it, ascending.
//
//	{"op":"partition_check","space":[0,100],"parts":[[[0,40]],[[40,100]]]}
//	{"ok":true,"partition":true}
//	{"op":"partition_check","space":[0,100],"parts":[[[0,50]],[[40,100]]]}
//	{"ok":true,"partition":false,"at":40,"owners":[0,1]}
//	{"op":"partition_check","modulus":4,"parts":[[0,2],[3]]}
//	{"ok":true,"partition":false,"at":1,"owners":[]}
//
// Errors. A request that fails gets {"ok":false,"kind":…,"field":…,"error":…}. "field" is the
// path of the fault in the request ("order[0].dir", "shards[1][4]", "aggs[2]"; "" for the whole
// line) and "error" says what is wrong for people. The kinds, in order of precedence (a line
// with several faults reports the first kind that applies):
//
//   - bad_request: the line is not a request as specified: not JSON, an unknown or repeated
//     field, a wrong type, a negative column, an unknown aggregate, an empty range.
//   - not_decomposable: an aggregate partials cannot produce: count, sum or avg with "distinct"
//     true, or array_agg, string_agg, json_agg, jsonb_agg, json_object_agg, jsonb_object_agg,
//     percentile_cont, percentile_disc, mode, stddev, stddev_pop, stddev_samp, variance, var_pop,
//     var_samp.
//   - bad_data: the data does not fit the query: a row lacks a column the query reads, sum or avg
//     meets a non-number, a partial count is not a non-negative integer, a partial row has the
//     wrong width.
//   - unsorted: a merge shard's rows are not sorted by "order" (every row is checked, not only
//     those the limit reads).
//
// Two implementations agree when they agree on "ok", the result fields and, for errors, "kind";
// "field" and "error" are for people.
//
//	{"op":"merge","order":[{"col":0,"dir":"up"}],"shards":[]}
//	{"ok":false,"kind":"bad_request","field":"order[0].dir","error":"merge: order[0].dir: \"up\" is not asc or desc"}
//	{"op":"aggregate","aggs":[{"fn":"count","col":0,"distinct":true}],"input":"rows","shards":[]}
//	{"ok":false,"kind":"not_decomposable","field":"aggs[0]","error":"merge: aggs[0]: count(distinct) is not decomposable: …"}
//	{"op":"merge","order":[{"col":0}],"shards":[[[2],[1]]]}
//	{"ok":false,"kind":"unsorted","field":"shards[0][1]","error":"merge: shards[0][1] sorts before shards[0][0] under the ORDER BY; …"}
package merge
