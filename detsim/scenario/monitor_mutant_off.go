//go:build !loam_mutant_indoubt_commit

package scenario

import "loam.dev/router/machine/indoubt"

// execMutant carries out commands only a mutant build has; this build has none.
func (m *monitor) execMutant(indoubt.Command) bool { return false }

// indoubtMutants are the monitor mutants this build can run.
var indoubtMutants []string

// MutantBuild reports whether this build bakes a mutant into a machine (then every run of
// the scenarios using that machine is the mutant's, and only the mutant tests are
// meaningful).
const MutantBuild = false
