//go:build !loam_mutant_indoubt_commit

package spec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// TestModelReplayCrossShardCommit is issue 18's model-based test for the CrossShardCommit
// model: runs its simulator generates are replayed on machine/indoubt. The replay plays
// the coordinator and its two branches the way the model's steps say (a PREPARE landing is
// a prepared transaction with that time, a restart a process of node1 that started then, a
// crash no process), and each monitor step as the monitor's inputs: a round (the first is
// Track, the next the round timer) whose scans answer with the branches prepared, then the
// roster. After each step the monitor must have emitted the model's actions, its alert
// (none, orphan: the coordinator gone or restarted, or stuck) must be the model's, and no
// branch may have changed but as the model's coordinator changed it. SPEC_REPLAY_RUNS
// (default 150: at 30 no run had one branch prepared before a coordinator restart and
// another, stuck, after it, whose alert the monitor called stuck and the model orphan,
// machine/indoubt's TestAlertTakesTheOrphanReasonOfAnyBranch) sets how many runs. The monitor built with -tags
// loam_mutant_indoubt_commit (it commits an orphan's branches) must fail the same runs:
// TestModelReplayCrossShardCommitMutant, crossshard_replay_mutant_test.go.
func TestModelReplayCrossShardCommit(t *testing.T) {
	runs := crossShardRuns(t)
	steps, alerts, restarts, failed := 0, map[string]int{}, 0, 0
	for _, r := range runs {
		require.NoError(t, replayCrossShard(r))
		steps += len(r.States) - 1
		seen := map[string]bool{}
		for _, s := range r.States {
			switch ok, _ := s.Picks["ok"].(bool); {
			case s.Action == "MonitorRestart":
				restarts++
			case s.Action == "MonitorRoster" && !ok:
				failed++
			}
			if s.S.Alert != "" && !seen[s.S.Alert] {
				seen[s.S.Alert] = true
				alerts[s.S.Alert]++
			}
		}
	}
	t.Logf("%d model runs (%d steps, %d monitor restarts, %d failed rosters) replayed on machine/indoubt; runs alerting: %v",
		len(runs), steps, restarts, failed, alerts)
	require.Greater(t, alerts["orphan"], 0, "no replayed run alerted an orphan")
	require.Greater(t, restarts, 0, "no replayed run restarted the monitor")
	require.Greater(t, failed, 0, "no replayed run failed a roster")
}

// csCommitted: the monitor of a normal build has no command that resolves a transaction.
func csCommitted(indoubt.Command) (string, bool) { return "", false }
