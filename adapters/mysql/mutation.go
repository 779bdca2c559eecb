package mysql

// mutation switches on one deliberate bug, so tests can show that the contract cases and this
// package's own tests catch a backend that has it. Only tests set it (export_test.go); it is
// zero otherwise.
type mutation uint32

const (
	// mutFenceSkipKill: accounts are locked, open connections keep writing.
	mutFenceSkipKill mutation = 1 << iota
	// mutFenceSkipLock: connections are killed but new logins are let in.
	mutFenceSkipLock
	// mutFenceOneHost: only user@'%' is locked; the user's other host entries still log in.
	mutFenceOneHost
	// mutFenceKillsAll: every client connection is killed, not only the fenced user's.
	mutFenceKillsAll
	// mutFenceBinlogged: the fence's statements go to the binary log (an errant GTID on an
	// old primary).
	mutFenceBinlogged
	// mutUnfenceNoop: UnfenceWrites does nothing.
	mutUnfenceNoop
	// mutUnfenceAll: UnfenceWrites unlocks every account of the user, also those locked
	// before the fence.
	mutUnfenceAll
	// mutStatusStandby: a primary reports itself as a replica.
	mutStatusStandby
	// mutStatusSlavePos: the write position is read from gtid_slave_pos, which a primary
	// never advances.
	mutStatusSlavePos
	// mutPreparedJoinsData: a gid is XA RECOVER's data, gtrid and bqual run together.
	mutPreparedJoinsData
	// mutChecksumOrdered: the digest chains rows in scan order.
	mutChecksumOrdered
	// mutChecksumXOR: row hashes are combined by XOR, so a duplicated row cancels out.
	mutChecksumXOR
	// mutChecksumWrongVindex: rows are routed by xxhash whatever vindex the scheme names.
	mutChecksumWrongVindex
	// mutChecksumNullIsEmpty: a NULL column is encoded like an empty string.
	mutChecksumNullIsEmpty
	// mutNoSettle: a fence or unfence cut short returns without waiting for its server
	// connection to end, so its change may land after the error.
	mutNoSettle
)
