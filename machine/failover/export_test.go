package failover

// MaxRebases is how often the repoint is made again on top of someone else's write before the
// failover ends Failed (for the tests of that bound).
const MaxRebases = maxRebases
