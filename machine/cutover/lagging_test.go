package cutover_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/cutover"
)

// TestLaggingSaysWhatTheWorldShows: the designated instance restarted after its CUTOVER (the
// check finds no stream) and its reload then failed, so it is listed lagging; finalize's
// reload of it succeeds, so it is on the published generation's files after all: Done must
// not claim it lagging, and the old shards are opened (the fence is not kept for it).
func TestLaggingSaysWhatTheWorldShows(t *testing.T) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	unfencedSource := 0
	done := drive(t, nil, plan, func(cutover.Command) {}, func(c cutover.Command) cutover.Input {
		switch c := c.(type) {
		case cutover.ListTasks:
			if strings.Contains(c.Step, "/check/") {
				return cutover.TasksListed{Step: c.Step} // restarted: its tasks, the reverse stream with them, are gone
			}
		case cutover.Reload:
			if strings.Contains(c.Step, "/check/reload/") {
				return cutover.Reply{Step: c.Step, Err: errors.New("unreachable")}
			}
		case cutover.Unfence:
			if strings.Contains(c.Step, "/unfence/") {
				unfencedSource++
			}
		}
		return nil
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Empty(t, done.Lagging, "pgdog-1 reloaded the published generation at finalize")
	require.NotZero(t, unfencedSource, "the old shards stay fenced for an instance that is not lagging")
}

// TestFinalReloadFailureKeepsTheFenceUnlessChecked: the designated instance restarted after
// its CUTOVER (the check finds no stream), and finalize's reload of it fails. If the check's
// reload put it on the published generation's files, a restart keeps it there: it is not
// lagging and the old shards open. If that reload failed too, it may route by the old
// generation's files to the old shards: it is listed lagging and the fence stays on them.
func TestFinalReloadFailureKeepsTheFenceUnlessChecked(t *testing.T) {
	for _, checkReloadFails := range []bool{false, true} {
		opts := cutover.Options{PollEvery: 10, RetryAfter: 50, Attempts: 2, Grace: 10, FinalizeAfter: 10}
		plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
		unfencedSource := 0
		done := drive(t, nil, plan, func(cutover.Command) {}, func(c cutover.Command) cutover.Input {
			switch c := c.(type) {
			case cutover.ListTasks:
				if strings.Contains(c.Step, "/check/") {
					return cutover.TasksListed{Step: c.Step} // restarted: the reverse stream is gone
				}
			case cutover.Reload:
				if strings.Contains(c.Step, "/final/reload/") || checkReloadFails && strings.Contains(c.Step, "/check/reload/") {
					return cutover.Reply{Step: c.Step, Err: errors.New("unreachable")}
				}
			case cutover.Unfence:
				if strings.Contains(c.Step, "/unfence/") {
					unfencedSource++
				}
			}
			return nil
		})
		require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
		if checkReloadFails {
			require.Equal(t, []string{"pgdog-1"}, done.Lagging)
			require.Zero(t, unfencedSource, "the old shards stay fenced while pgdog-1 may route to them")
		} else {
			require.Empty(t, done.Lagging, "pgdog-1 was reloaded onto the published generation by the check")
			require.NotZero(t, unfencedSource)
		}
	}
}
