package vreshard_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/vreshard"
)

// TestOptionsAndDefaults: the step retries, their alert and the polls follow the options
// given, and zero options take the defaults (RetryAfter 500 ms with up to half again of
// jitter when the driver gives ctx.Rand, an alert on the 3rd failure, a poll every
// 1000 ms). Found by make mutate: a default applied to negative values only, or over a
// value given, kept every property green, the fixture's options being close to the
// defaults.
func TestOptionsAndDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		opts                  vreshard.Options
		retry, attempts, poll int64
		noRand                bool
	}{
		{"given", vreshard.Options{RetryAfter: 40, Attempts: 2, PollEvery: 7}, 40, 2, 7, false},
		{"defaults", vreshard.Options{}, 500, 3, 1000, false},
		{"no rand", vreshard.Options{RetryAfter: 40, Attempts: 2, PollEvery: 7}, 40, 2, 7, true},
		{"two ms", vreshard.Options{RetryAfter: 2, Attempts: 2, PollEvery: 7}, 2, 2, 7, false}, // jitter 0 or 1 ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fixture()
			st.Options = tc.opts
			d := newDriver(t, newWorld(st.Record), st)
			if tc.noRand {
				d.rng = nil
			}
			var delays []int64
			// The Inspect fails attempts+1 times: a retry after each, the alert on the
			// attempts-th failure.
			for i := int64(1); i <= tc.attempts+1; i++ {
				require.Len(t, d.pending, 1, strings.Join(d.log, "\n"))
				c := d.pending[0]
				d.pending = d.pending[1:]
				d.armed = nil
				d.feed(d.w.apply(c, errors.New("unreachable"), false))
				require.Len(t, d.armed, 1, "failure %d arms no retry\n%s", i, strings.Join(d.log, "\n"))
				delay := d.armed[0].Delay
				require.True(t, delay >= tc.retry && delay <= tc.retry+tc.retry/2, "failure %d retries after %d ms, RetryAfter is %d", i, delay, tc.retry)
				delays = append(delays, delay)
				if i < tc.attempts {
					require.Empty(t, d.alerts, "an alert after %d failures, Attempts is %d", i, tc.attempts)
				} else {
					require.Len(t, d.alerts, 1, "after %d failures (Attempts %d)", i, tc.attempts)
				}
				for id, at := range d.timers {
					d.now = at
					delete(d.timers, id)
					d.feed(vreshard.TimerFired{ID: id})
				}
			}
			// With ctx.Rand the retries are jittered (up to half again), so drivers that
			// failed together do not retry together; without it each is RetryAfter later.
			if jittered := slices.ContainsFunc(delays, func(x int64) bool { return x != tc.retry }); jittered == tc.noRand {
				t.Fatalf("retry delays %v, RetryAfter %d, ctx.Rand set: %v", delays, tc.retry, !tc.noRand)
			}
			d.armed = nil
			d.settle()
			require.Empty(t, d.violations())
			polls := 0
			for _, a := range d.armed {
				if strings.HasPrefix(a.ID, "poll:") {
					polls++
					require.Equal(t, tc.poll, a.Delay, "poll %s", a.ID)
				}
			}
			require.NotZero(t, polls, "the reshard never polled\n%s", strings.Join(d.log, "\n"))
		})
	}
}

// TestCatchUpWaitsForTheLag: the copy counts as caught up at a lag of MaxLagMs and not
// above: with heavy writes the first polls show 9000 and 5001 ms, and the VDiff starts on
// the poll that shows 5000 (the default MaxLagMs), not one poll earlier or later (make
// mutate: > for >= was seen by nothing, the world's lag being a constant 100 ms). That the
// gate is needed at all is TestWriteStopBoundedByMaxLag's.
func TestCatchUpWaitsForTheLag(t *testing.T) {
	st := fixture()
	w := newWorld(st.Record)
	w.copyPolls, w.lags = 0, []int64{9000, 5001, 5000}
	d := newDriver(t, w, st)
	d.settle()
	require.Empty(t, d.violations(), strings.Join(d.log, "\n"))
	require.Equal(t, vreshard.Completed, d.done.Outcome)
	for i, c := range d.log {
		if strings.HasPrefix(c, "VDiff ") {
			require.Equal(t, 3, strings.Count(strings.Join(d.log[:i], "\n"), "Status "), "Status polls before the VDiff\n%s", strings.Join(d.log, "\n"))
			return
		}
	}
	t.Fatalf("no VDiff\n%s", strings.Join(d.log, "\n"))
}

// TestRecordKeepsChanging: another writer changing the routing (a new generation) before
// each of the mirror's writes is rebased over 8 times (maxRebases), and the 9th time the
// reshard fails, saying the record keeps changing (make mutate: the bound one higher, or
// the counter counting down, was seen by nothing: the world's other writer only ever
// wrote identical content, which does not count).
func TestRecordKeepsChanging(t *testing.T) {
	for _, tc := range []struct {
		changes int
		want    vreshard.Outcome
	}{{8, vreshard.Completed}, {9, vreshard.Failed}} {
		st := fixture()
		w := newWorld(st.Record)
		w.changes = tc.changes
		d := newDriver(t, w, st)
		d.settle()
		require.NotNil(t, d.done, "%d changes: no Done\n%s", tc.changes, strings.Join(d.log, "\n"))
		require.Equal(t, tc.want, d.done.Outcome, "%d changes: %s\n%s", tc.changes, d.done.Reason, strings.Join(d.log, "\n"))
		if tc.want == vreshard.Failed {
			require.Contains(t, d.done.Reason, "keeps changing")
		}
	}
}
