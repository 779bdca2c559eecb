package merge

// mutation switches on a deliberate bug, so a test can show that the property guarding that
// behaviour fails when the behaviour is wrong. Every exported function runs with none.
type mutation uint32

const (
	// mutTieHighShardFirst lets the higher shard index win a tie: the merge is no longer the
	// stable sort of the concatenation.
	mutTieHighShardFirst mutation = 1 << iota
	// mutPerShardLimitIgnoresOffset asks shards for LIMIT n instead of LIMIT n+offset.
	mutPerShardLimitIgnoresOffset
	// mutUncheckedTail skips checking the order of rows the LIMIT did not read.
	mutUncheckedTail
	// mutAvgOfAverages combines AVG as the mean of the per-shard averages, the classic mistake.
	mutAvgOfAverages
	// mutClosedRanges reads ranges as [lo, hi] instead of [lo, hi), so adjacent ranges overlap.
	mutClosedRanges
)
