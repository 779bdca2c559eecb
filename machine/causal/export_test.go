package causal

import "loam.dev/router/kernel/lsn"

// Mutants of the machine, reachable only from tests: each breaks one promise of the package
// doc, and a test shows that the matching property check fails with it.
const (
	MutantRefix             = mutantRefix
	MutantIgnoreRequirement = mutantIgnoreRequirement
	MutantInclusiveAfter    = mutantInclusiveAfter
	MutantForgetDown        = mutantForgetDown
	MutantNoWake            = mutantNoWake
	MutantPerHostgroup      = mutantPerHostgroup
	MutantAgedLatest        = mutantAgedLatest
)

// Mutant is the test-visible name of the mutant type.
type Mutant = mutant

// NewMutant returns a machine running the given mutant.
func NewMutant(cfg Config, m Mutant) *Machine {
	mc := New(cfg)
	mc.mutant = m
	return mc
}

// Retained counts retained samples across every history the machine holds (including the
// per-hostgroup copies of the mutant that makes them).
func (m *Machine) Retained() int {
	n := 0
	m.eachHistory(func(h *lsn.History) { n += h.Len() })
	return n
}
