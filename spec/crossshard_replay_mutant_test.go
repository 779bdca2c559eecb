//go:build loam_mutant_indoubt_commit

package spec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestModelReplayCrossShardCommitMutant: the monitor built with -tags
// loam_mutant_indoubt_commit commits the branches of an orphan (the model's Guess mutant),
// and some replayed model run must catch it.
func TestModelReplayCrossShardCommitMutant(t *testing.T) {
	runs := crossShardRuns(t)
	err := firstReplayError(runs, replayCrossShard)
	var re *replayError
	require.ErrorAs(t, err, &re, "the monitor that commits orphans replayed every model run: the replay does not check the branches")
	t.Logf("loam_mutant_indoubt_commit: %s", firstLine(err))
}

// csCommitted is the branch a CommitPrepared commits.
func csCommitted(c indoubt.Command) (string, bool) {
	cp, ok := c.(indoubt.CommitPrepared)
	for _, sh := range csShards {
		if ok && csGID(sh) == cp.GID {
			return sh, true
		}
	}
	return "", false
}
