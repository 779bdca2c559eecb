package check_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine/cutover"
)

// TestCutoverCheckers: each of the cutover's shared checkers names its invariant on the
// step or the claim that breaks it, and passes the protocol's own.
func TestCutoverCheckers(t *testing.T) {
	fenced := map[string]bool{"s0": true, "s1": true}
	isFenced := func(s string) bool { return fenced[s] }
	move := check.Move{Generation: 5, Leaves: []string{"s0", "s1"}, Fenced: isFenced, Cut: true, Designated: "d"}
	require.Nil(t, check.Publish(move))

	fenced["s1"] = false
	v := check.Publish(move)
	require.NotNil(t, v)
	require.Equal(t, check.InvPublishFenced, v.Invariant)
	require.Contains(t, v.Detail, "shard s1")

	fenced["s1"] = true
	move.Cut = false
	v = check.Publish(move)
	require.Equal(t, check.InvPublishAfterCutover, v.Invariant)
	require.Contains(t, v.Detail, "before CUTOVER took effect on d")
	move.Reverse = true
	require.Contains(t, check.Publish(move).Detail, "the reverse CUTOVER")

	open := check.Resumed{Instance: "i", Stored: 5, Serves: []string{"n0"}, Fenced: isFenced}
	require.Nil(t, check.Resume(open))
	fenced["n0"] = true
	require.Equal(t, check.InvResumeOpen, check.Resume(open).Invariant)
	fenced["n0"] = false
	open.Unpublished = 5
	require.Contains(t, check.Resume(open).Detail, "generation 5 is not published")

	answers := map[string]check.Answered{
		"app/4/resume/i":          {Instance: "i", Kind: check.KindResume, OK: true},
		"app/4/reverse1/resume/i": {Instance: "i", Kind: check.KindResume, OK: false},
		"app/4/resume/j":          {Instance: "j", Kind: check.KindResume, OK: true},
		"app/4/pause/j":           {Instance: "j", Kind: check.KindPause, OK: false},
	}
	// i failed one RESUME step: naming it is right. j failed its PAUSE, not its RESUME.
	require.Nil(t, check.Claims(0, cutover.Done{Missed: []string{"j"}, Unresumed: []string{"i"}}, answers))
	// k was sent nothing of the kind: not judged.
	require.Nil(t, check.Claims(0, cutover.Done{Missed: []string{"k"}, Lagging: []string{"k"}, Unresumed: []string{"k"}}, answers))
	v = check.Claims(0, cutover.Done{Unresumed: []string{"i", "j"}}, answers)
	require.NotNil(t, v)
	require.Equal(t, check.InvClaims, v.Invariant)
	require.Contains(t, v.Detail, "Done lists j in Unresumed")
	require.Equal(t, check.InvClaims, check.Claims(0, cutover.Done{Lagging: []string{"j"}},
		map[string]check.Answered{"r": {Instance: "j", Kind: check.KindReload, OK: true}}).Invariant)
}

// TestStuckAlert: the alert that a CUTOVER is still running holds only against an answered
// attempt of its listing that lists the task in the state it names, not ended.
func TestStuckAlert(t *testing.T) {
	reason := "CUTOVER 7 on pgdog-1 is still cutting_over after 20 listings: every instance is paused"
	step := "app/4/cutover/pgdog-1/20"
	running := []cutover.Task{{ID: 3, State: cutover.TaskFinished}, {ID: 7, State: cutover.TaskCuttingOver}}
	require.Nil(t, check.StuckAlert(0, step, reason, map[string][]cutover.Task{step: running}))
	require.Nil(t, check.StuckAlert(0, step, reason, map[string][]cutover.Task{step + "#2": running}), "its retry answered")
	require.Nil(t, check.StuckAlert(0, step, "CUTOVER on pgdog-1 took effect but no reverse stream is listed", nil), "another alert")
	for name, listed := range map[string]map[string][]cutover.Task{
		"no answer":             {},
		"an earlier poll's":     {"app/4/cutover/pgdog-1/19": running},
		"finished":              {step: {{ID: 7, State: cutover.TaskFinished}}},
		"replicating":           {step: {{ID: 7, State: cutover.TaskReplicating}}},
		"not listed":            {step: {{ID: 3, State: cutover.TaskCuttingOver}}},
		"stopping, not cutting": {step: {{ID: 7, State: cutover.TaskStopping}}},
	} {
		v := check.StuckAlert(5, step, reason, listed)
		require.NotNil(t, v, name)
		require.Equal(t, check.InvStuckAlert, v.Invariant, name)
	}
}

// TestFenceKeptAlert: the fence-kept alert may name only instances a RELOAD did not answer
// OK; another alert is not judged.
func TestFenceKeptAlert(t *testing.T) {
	answers := map[string]check.Answered{
		"app/4/reload/a": {Instance: "a", Kind: check.KindReload, OK: false},
		"app/4/reload/b": {Instance: "b", Kind: check.KindReload, OK: true},
		"app/4/pause/c":  {Instance: "c", Kind: check.KindPause, OK: true},
	}
	kept := func(names string) string {
		return "fence kept on the old shards: (" + names + ") never reloaded generation 5; unfence by hand once they route by it"
	}
	require.Nil(t, check.FenceKeptAlert(0, kept("a"), answers))
	require.Nil(t, check.FenceKeptAlert(0, kept("a,c"), answers), "c was sent no RELOAD: not judged")
	require.Nil(t, check.FenceKeptAlert(0, "STOP_TASK failed: (b)", answers))
	for _, names := range []string{"b", "a,b", "b,a"} {
		v := check.FenceKeptAlert(7, kept(names), answers)
		require.NotNil(t, v, names)
		require.Equal(t, check.InvClaims, v.Invariant)
		require.Contains(t, v.Detail, "lists b in Lagging")
	}
}
