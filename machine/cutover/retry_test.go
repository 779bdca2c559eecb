package cutover_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// finalUnfenceFailing drives a cutover to Finalized with the first source shard's final
// Unfence (a persistent op: it is retried until it succeeds) failing fails times. It returns
// how many of those failures had been answered when each Alert naming that Unfence was
// raised, and the delay from each failure to the retry timer it set.
func finalUnfenceFailing(t *testing.T, rnd *rand.Rand, fails int) (alertedAfter []int, delays []int64) {
	opts := cutover.Options{PollEvery: 10, RetryAfter: 1000, Attempts: 3, Grace: 10, FinalizeAfter: 10}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub", Options: opts}
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard, Rand: rnd}
	shard, step := "", "" // the failing Unfence: its shard and its step (the first attempt's id)
	failed, failedAt := 0, int64(0)
	done := drive(t, ctx, plan, func(c cutover.Command) {
		switch c := c.(type) {
		case cutover.Alert:
			if step != "" && c.Step == step {
				alertedAfter = append(alertedAfter, failed)
			}
		case cutover.SetTimer:
			if step != "" && c.ID == "retry:"+step {
				delays = append(delays, c.At-failedAt)
			}
		}
	}, func(c cutover.Command) cutover.Input {
		u, ok := c.(cutover.Unfence)
		if !ok || !strings.Contains(u.Step, "/unfence/") {
			return nil
		}
		if shard == "" {
			shard, step = u.Shard, u.Step
		}
		if u.Shard != shard || failed == fails {
			return nil
		}
		failed++
		failedAt = ctx.Now + 1
		return cutover.Reply{Step: u.Step, Err: errors.New("connection refused")}
	})
	require.Equal(t, cutover.Finalized, done.Outcome, done.Reason)
	require.Equal(t, fails, failed, "every failure was retried")
	return alertedAfter, delays
}

// TestPersistentRetryAlertsOnItsAttemptsthFailure: an op that must be retried until it
// succeeds raises one Alert, on its Attempts-th failure: not before (a false alarm while
// its ordinary retries are still running) and not later (an operator left unwarned).
func TestPersistentRetryAlertsOnItsAttemptsthFailure(t *testing.T) {
	alerted, _ := finalUnfenceFailing(t, nil, 2)
	require.Empty(t, alerted, "2 failures of 3 attempts raise no Alert")
	alerted, _ = finalUnfenceFailing(t, nil, 7)
	require.Equal(t, []int{3}, alerted, "one Alert, on the 3rd failure")
}

// TestRetriesJittered: with ctx.Rand the retries of a failing op wait RetryAfter to
// 1.5 × RetryAfter, spread (ops failing together do not retry in step); without it each
// waits exactly RetryAfter.
func TestRetriesJittered(t *testing.T) {
	_, delays := finalUnfenceFailing(t, rand.New(rand.NewPCG(7, 8)), 20)
	require.Len(t, delays, 20)
	distinct := map[int64]bool{}
	for _, d := range delays {
		require.True(t, d >= 1000 && d <= 1500, "retry %d ms after the failure", d)
		distinct[d] = true
	}
	require.Greater(t, len(distinct), 5, "20 retries drew %d distinct delays", len(distinct))

	_, delays = finalUnfenceFailing(t, nil, 5)
	require.Equal(t, []int64{1000, 1000, 1000, 1000, 1000}, delays)
}
