package vreshard_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// heavyWrites is the world of the MaxLagMs gate (issue 20 item 1): the streams lag by
// backlog ms when the copy ends and catch up at drain ms per second.
func heavyWrites(backlog, drain int64) func(*world) {
	return func(w *world) { w.copyPolls, w.backlog, w.drain = 0, backlog, drain }
}

// heavyRun runs a reshard to its end under heavyWrites(backlog, drain) with mutants mu; it
// must complete. It returns the world and the commands sent.
func heavyRun(t *testing.T, mu vreshard.Mutants, backlog, drain int64) (*world, string) {
	st := fixture()
	st.Options.Mutants = mu
	w := newWorld(st.Record)
	heavyWrites(backlog, drain)(w)
	d := newDriver(t, w, st)
	d.settle()
	log := strings.Join(d.log, "\n")
	require.NotNil(t, d.done, log)
	require.Equal(t, vreshard.Completed, d.done.Outcome, log)
	return w, log
}

// TestWriteStopBoundedByMaxLag: under heavy writes (a lag of 20 s when the copy ends,
// catching up 1 s a second) the machine polls until the lag is at or under MaxLagMs, so
// SwitchTraffic stops the writes for at most that long; without the gate (IgnoreLag) it
// goes on at once, and the stop is the 15 s or so the target still lags by when the writes
// switch: vreshard-write-stop trips.
func TestWriteStopBoundedByMaxLag(t *testing.T) {
	w, log := heavyRun(t, vreshard.Mutants{}, 20_000, 1000)
	require.Empty(t, w.violations, log)
	require.Positive(t, w.writeStop, log)
	require.LessOrEqual(t, w.writeStop, int64(5000), log)

	w, log = heavyRun(t, vreshard.Mutants{IgnoreLag: true}, 20_000, 1000)
	require.Greater(t, w.writeStop, int64(10_000), log)
	require.Contains(t, strings.Join(w.violations, "\n"), check.InvVReshardWriteStop, log)
}

// TestSwitchRefusedOverAllowedLag: without the gate and with a lag over Vitess's
// max_replication_lag_allowed (30 s), SwitchTraffic refuses and the machine retries until
// the lag is under it: Vitess's own bound lets through a stop of up to 30 s, which is why
// the gate is Loam's.
func TestSwitchRefusedOverAllowedLag(t *testing.T) {
	w, log := heavyRun(t, vreshard.Mutants{IgnoreLag: true}, 60_000, 1000)
	require.Contains(t, log, "id=retry:customer/wf/writes", "the switch of the writes was never refused")
	require.Greater(t, w.writeStop, int64(5000), log)
	require.LessOrEqual(t, w.writeStop, int64(maxLagAllowed), log)
	require.Contains(t, strings.Join(w.violations, "\n"), check.InvVReshardWriteStop, log)
}

// TestPropertyHeavyWrites: whatever the backlog and its catch-up, the failures, crashes and
// duplicate answers, the reshard completes, and the writes stop for at most MaxLagMs.
func TestPropertyHeavyWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		backlog := rapid.Int64Range(0, 60_000).Draw(t, "backlog")
		drain := rapid.Int64Range(200, 3000).Draw(t, "drain")
		d, v := run(machinetest.Rapid(t), t, rapid.IntRange(0, 120).Draw(t, "chaos"), vreshard.Mutants{}, heavyWrites(backlog, drain))
		if len(v) > 0 || d.done.Outcome != vreshard.Completed {
			t.Fatalf("violations %v, done %v\n%s", v, d.done, strings.Join(d.log, "\n"))
		}
	})
}
