//go:build loam_mutant_indoubt_commit

package indoubt_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
	"loam.dev/router/machine/machinetest"
)

// Run with: go test -tags loam_mutant_indoubt_commit ./machine/indoubt/
//
// TestMutantCommitIsCaught: the mutant build's CommitPrepared is found among the command
// types and fails the cannot-resolve check, and the property "the monitor only reads,
// alerts and waits" catches the mutant emitting it within 200 seeds.
func TestMutantCommitIsCaught(t *testing.T) {
	require.Contains(t, commandTypeNames(t, "loam_mutant_indoubt_commit"), "CommitPrepared")
	require.NotEmpty(t, cannotResolve(reflect.TypeOf(indoubt.CommitPrepared{})))
	for seed := uint64(1); seed <= 200; seed++ {
		w := newWorld(t, machinetest.Seeded(seed))
		if err := w.run(120); err != nil && strings.Contains(err.Error(), "CommitPrepared") {
			t.Logf("caught at seed %d: %v", seed, err)
			return
		}
	}
	t.Fatal("the commit mutant was not caught in 200 seeds")
}
