//go:build !loam_mutant_indoubt_commit

package scenario_test

// taggedMutants are the mutants this build can run that need a build tag: none here.
var taggedMutants []mutant
