//go:build loam_mutant_fresh

package controller

// freshStart, in the loam_mutant_fresh build only, makes a controller that takes the lease
// throw away the push machine's snapshot and start it new: the bug that "resume from the
// snapshot" prevents. TestTakeoverMutantRepeatsSteps shows the takeover test catches it.
const freshStart = true
