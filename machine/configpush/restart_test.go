package configpush_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// answerPending answers what is pending (the silent commands never), firing no timer.
func (f *fleet) answerPending() {
	for len(f.pending) > 0 {
		c := f.pending[0]
		f.pending = f.pending[1:]
		if !f.silent(c) {
			f.on(f.answer(c))
		}
	}
}

// restart is the driver dying and coming back: the machine restored from its snapshot with
// generation 4's files rendered again, the commands in flight and the timers lost with the
// driver, then Restarted. It returns the
// commands re-issued and the Restart event's reissued field.
func (f *fleet) restart(opts configpush.Options) ([]configpush.Command, int64) {
	b, err := json.Marshal(f.m.Snapshot())
	require.NoError(f.t, err)
	var s configpush.Snapshot
	require.NoError(f.t, json.Unmarshal(b, &s))
	f.m, err = configpush.RestoreWithFiles(s, (&world{}).record(4), filesFor(4), opts)
	require.NoError(f.t, err)
	f.pending, f.timers = nil, map[string]int64{}
	seen := len(f.events)
	out := f.on(configpush.Restarted{})
	i := slices.IndexFunc(f.events[seen:], func(e machine.SpecEvent) bool { return e.Action == configpush.ActRestart })
	require.GreaterOrEqual(f.t, i, 0, "no Restart event")
	for _, x := range f.events[seen+i].Fields {
		if x.Key == "reissued" {
			return out, x.Value.Int()
		}
	}
	f.t.Fatal("the Restart event has no reissued field")
	return nil, 0
}

func instanceOf(c configpush.Command) string {
	switch c := c.(type) {
	case configpush.AwaitFiles:
		return c.Instance
	case configpush.Reload:
		return c.Instance
	case configpush.Observe:
		return c.Instance
	}
	return ""
}

// TestRestartReissuesWhatWasInFlight: after a restart the machine sends again exactly the
// commands whose answers were in flight, in every instance stage (waiting for the files,
// reloading, observing) and the files write, each with a fresh deadline StepTimeout away;
// an instance in backoff keeps its retry time and one that is done is left alone; the
// Restart event counts what was sent again; then every instance is confirmed.
func TestRestartReissuesWhatWasInFlight(t *testing.T) {
	opts := propOpts
	opts.AwaitFiles = true
	f := newFleet(t)
	f.m = configpush.New(opts)
	f.silent = func(c configpush.Command) bool {
		switch c := c.(type) {
		case configpush.AwaitFiles:
			return c.Instance == "v"
		case configpush.Reload:
			return c.Instance == "r"
		case configpush.Observe:
			return c.Instance == "o"
		}
		return false
	}
	f.fail = func(c configpush.Command) bool { r, ok := c.(configpush.Reload); return ok && r.Instance == "k" }
	f.on(push(4, filesFor(4), "d", "k", "o", "r", "v"))
	f.answerPending()
	backoff, ok := f.timers["g4/instance/k"]
	require.True(t, ok, "k waits out its backoff")

	f.now += 10
	out, reissued := f.restart(opts)
	var got []string
	for _, c := range out {
		got = append(got, instanceOf(c))
	}
	require.ElementsMatch(t, []string{"o", "r", "v"}, got, "%v", out)
	require.EqualValues(t, 3, reissued)
	for _, id := range []string{"o", "r", "v"} {
		require.Equal(t, f.now+1000, f.timers["g4/instance/"+id], "%s's deadline after the restart", id)
	}
	require.Equal(t, backoff, f.timers["g4/instance/k"], "k's backoff stands")
	require.NotContains(t, f.timers, "g4/instance/d")

	f.silent = func(configpush.Command) bool { return false }
	f.fail = f.silent
	f.settle()
	require.ElementsMatch(t, []string{"d", "k", "o", "r", "v"}, f.last().Confirmed)

	// The files write in flight is sent again, with a fresh deadline.
	f = newFleet(t)
	f.silent = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.on(push(4, filesFor(4), "a"))
	f.answerPending()
	f.now += 10
	out, reissued = f.restart(propOpts)
	require.Len(t, out, 1)
	require.IsType(t, configpush.WriteFiles{}, out[0])
	require.EqualValues(t, 1, reissued)
	require.Equal(t, f.now+1000, f.timers["g4/files"])
}

// TestRetryEventNamesTheAttemptItStarts: the trace's Retry event carries the attempt of the
// command it sends (the spec's trace checks read it).
func TestRetryEventNamesTheAttemptItStarts(t *testing.T) {
	f := newFleet(t)
	failed := 0
	f.fail = func(c configpush.Command) bool {
		if _, ok := c.(configpush.Reload); ok && failed < 2 {
			failed++
			return true
		}
		return false
	}
	f.on(push(4, filesFor(4), "a"))
	f.answerPending()
	for range 2 {
		seen := len(f.events)
		f.now = f.timers["g4/instance/a"]
		out := f.on(configpush.TimerFired{ID: "g4/instance/a"})
		require.Len(t, out, 1)
		i := slices.IndexFunc(f.events[seen:], func(e machine.SpecEvent) bool { return e.Action == configpush.ActRetry })
		require.GreaterOrEqual(t, i, 0)
		j := slices.IndexFunc(f.events[seen+i].Fields, func(x machine.Field) bool { return x.Key == "attempt" })
		require.EqualValues(t, out[0].(configpush.Reload).Attempt, f.events[seen+i].Fields[j].Value.Int())
		f.answerPending()
	}
	f.settle()
	require.Equal(t, []string{"a"}, f.last().Confirmed)
}

// TestHaltedQueuedPushRestores: a push whose files write waits behind an older push's
// write still in flight, restored with files that no longer match its digest (a password
// rotated), ends with ErrFilesChanged; what it leaves is a valid snapshot that restores
// again.
func TestHaltedQueuedPushRestores(t *testing.T) {
	f := newFleet(t)
	f.silent = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.on(push(4, filesFor(4), "a"))
	f.on(push(5, filesFor(5), "a")) // replaces generation 4, whose write is still out
	b, err := json.Marshal(f.m.Snapshot())
	require.NoError(t, err)
	var s configpush.Snapshot
	require.NoError(t, json.Unmarshal(b, &s))
	m, err := configpush.RestoreWithFiles(s, (&world{}).record(5), rotated(5), propOpts)
	require.NoError(t, err)
	out := m.On(&machine.Ctx{Now: f.now, Trace: machine.Discard}, configpush.Restarted{})
	i := slices.IndexFunc(out, func(c configpush.Command) bool { _, ok := c.(configpush.Outcome); return ok })
	require.GreaterOrEqual(t, i, 0, "the halted push reports its end: %v", out)
	require.Contains(t, out[i].(configpush.Outcome).FilesErr, configpush.ErrFilesChanged.Error())
	b, err = json.Marshal(m.Snapshot())
	require.NoError(t, err)
	var s2 configpush.Snapshot
	require.NoError(t, json.Unmarshal(b, &s2))
	_, err = configpush.Restore(s2, propOpts)
	require.NoError(t, err, "the halted push's snapshot restores")
}
