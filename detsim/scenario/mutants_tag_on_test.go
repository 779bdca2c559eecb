//go:build loam_mutant_indoubt_commit

package scenario_test

import "loam.dev/router/detsim/scenario"

// taggedMutants are the mutants that exist only with a build tag.
var taggedMutants = []mutant{
	{"bank", scenario.MutantIndoubtCommit, "indoubt-never-resolves", 200},
}
