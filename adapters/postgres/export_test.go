package postgres

import (
	"context"
	"fmt"
	"strings"
)

// Mutations names the deliberate bugs tests can switch on (see mutation.go).
var Mutations = map[string]mutation{
	"fence-skips-terminate":   mutFenceSkipTerminate,
	"fence-skips-nologin":     mutFenceSkipNologin,
	"fence-skips-members":     mutFenceSkipMembers,
	"fence-ends-all-sessions": mutFenceEndsAll,
	"unfence-noop":            mutUnfenceNoop,
	"no-settle":               mutNoSettle,
	"status-says-standby":     mutStatusStandby,
	"prepared-all-databases":  mutPreparedAllDatabases,
	"checksum-ordered":        mutChecksumOrdered,
	"checksum-xor":            mutChecksumXOR,
	"checksum-signed-modulo":  mutChecksumSignedModulo,
}

// Mutate switches on the named bug in b.
func Mutate(b *Backend, name string) {
	m, ok := Mutations[name]
	if !ok {
		panic(fmt.Sprintf("no mutation %q", name))
	}
	b.mut |= m
}

// DrainTarget runs AwaitSlotDrain's target query on b with the literal position lsn in
// place of pg_current_wal_insert_lsn(): what the drain would wait for there.
func DrainTarget(ctx context.Context, b *Backend, lsn string) (string, error) {
	q := strings.Replace(drainTargetQuery, drainPosition, "'"+lsn+"'::pg_lsn", 1)
	var at, target string
	err := b.pool.QueryRow(ctx, q).Scan(&at, &target)
	return target, err
}
