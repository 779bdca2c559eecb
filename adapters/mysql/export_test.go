package mysql

import (
	"database/sql"
	"fmt"
)

// Mutations names the deliberate bugs tests can switch on (see mutation.go).
var Mutations = map[string]mutation{
	"fence-skips-kill":       mutFenceSkipKill,
	"fence-skips-lock":       mutFenceSkipLock,
	"fence-one-host":         mutFenceOneHost,
	"fence-kills-all":        mutFenceKillsAll,
	"fence-binlogged":        mutFenceBinlogged,
	"unfence-noop":           mutUnfenceNoop,
	"unfence-unlocks-all":    mutUnfenceAll,
	"status-says-standby":    mutStatusStandby,
	"status-slave-pos":       mutStatusSlavePos,
	"prepared-joins-data":    mutPreparedJoinsData,
	"checksum-ordered":       mutChecksumOrdered,
	"checksum-xor":           mutChecksumXOR,
	"checksum-wrong-vindex":  mutChecksumWrongVindex,
	"checksum-null-is-empty": mutChecksumNullIsEmpty,
	"no-settle":              mutNoSettle,
}

// Mutate switches on the named bug in b.
func Mutate(b *Backend, name string) {
	m, ok := Mutations[name]
	if !ok {
		panic(fmt.Sprintf("no mutation %q", name))
	}
	b.mut |= m
}

// DB is b's connection pool, for tests that read a session's settings.
func DB(b *Backend) *sql.DB { return b.db }
