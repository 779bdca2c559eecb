package postgres

import "fmt"

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
