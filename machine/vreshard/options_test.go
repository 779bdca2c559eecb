package vreshard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/vreshard"
)

// TestOptionsAndDefaults: the step retries, their alert and the polls follow the options
// given, and zero options take the defaults (RetryAfter 500 ms with up to half again of
// jitter, an alert on the 3rd failure, a poll every 1000 ms). Found by make mutate: a
// default applied to negative values only, or over a value given, kept every property
// green, the fixture's options being close to the defaults.
func TestOptionsAndDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		opts                  vreshard.Options
		retry, attempts, poll int64
	}{
		{"given", vreshard.Options{RetryAfter: 40, Attempts: 2, PollEvery: 7}, 40, 2, 7},
		{"defaults", vreshard.Options{}, 500, 3, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fixture()
			st.Options = tc.opts
			d := newDriver(t, newWorld(st.Record), st)
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
