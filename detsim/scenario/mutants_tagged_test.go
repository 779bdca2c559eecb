package scenario_test

// taggedMutantsAllBuilds lists the build-tagged mutants whatever the build, so the
// invariant table can count them: run them with
// go test -tags loam_mutant_indoubt_commit -run TestMutants ./detsim/scenario/.
var taggedMutantsAllBuilds = []mutant{
	{"bank", "indoubt-commit", "indoubt-never-resolves", 200},
}
