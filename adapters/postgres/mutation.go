package postgres

// mutation switches on one deliberate bug, so tests can show that the contract cases catch
// a backend that has it. Only tests set it (export_test.go); it is zero otherwise.
type mutation uint32

const (
	// mutFenceSkipTerminate: NOLOGIN only, open sessions keep writing.
	mutFenceSkipTerminate mutation = 1 << iota
	// mutFenceSkipNologin: sessions are ended but new logins are let in.
	mutFenceSkipNologin
	// mutFenceSkipMembers: members that SET ROLE to the fenced role are left alone.
	mutFenceSkipMembers
	// mutFenceEndsAll: every non-superuser session is ended, not only the fenced role's.
	mutFenceEndsAll
	// mutUnfenceNoop: UnfenceWrites does nothing.
	mutUnfenceNoop
	// mutStatusStandby: a primary reports itself as a standby.
	mutStatusStandby
	// mutPreparedAllDatabases: prepared transactions of every database are listed.
	mutPreparedAllDatabases
	// mutChecksumOrdered: the digest chains rows in scan order.
	mutChecksumOrdered
	// mutChecksumXOR: row hashes are combined by XOR, so a duplicated row cancels out.
	mutChecksumXOR
	// mutChecksumSignedModulo: the shard is the signed row hash modulo the shard count.
	mutChecksumSignedModulo
	// mutNoSettle: a fence or unfence cut short returns without waiting for its server
	// session to end, so its change may land after the error.
	mutNoSettle
)
