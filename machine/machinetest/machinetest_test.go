package machinetest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/cockroachdb/datadriven"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/machinetest"
)

type snap struct {
	N    int `json:"n"`
	lost int // unexported: encoding/json drops it
}

type counter struct{ s snap }

func (c *counter) Snapshot() snap { return c.s }

type fatal struct{ msg string }

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func roundTrip(m *counter, restore func(snap) (*counter, error)) (msg string) {
	f := &fatal{}
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
		msg = f.msg
	}()
	machinetest.RoundTrip(f, m, restore)
	return ""
}

// TestRoundTripCatchesLostState: state that does not survive JSON, or a Restore that does
// not rebuild what was saved, fails the round trip.
func TestRoundTripCatchesLostState(t *testing.T) {
	faithful := func(s snap) (*counter, error) { return &counter{s}, nil }
	require.Empty(t, roundTrip(&counter{snap{N: 3}}, faithful))

	forgetful := func(s snap) (*counter, error) { return &counter{snap{N: s.N - 1}}, nil }
	require.Contains(t, roundTrip(&counter{snap{N: 3}}, forgetful), "does not survive")

	// An unexported field is dropped by JSON; a Restore that reads it shows the loss.
	byLost := func(s snap) (*counter, error) { return &counter{snap{N: s.lost}}, nil }
	require.Contains(t, roundTrip(&counter{snap{N: 3, lost: 3}}, byLost), "does not survive")

	failing := func(snap) (*counter, error) { return nil, fmt.Errorf("bad snapshot") }
	require.Contains(t, roundTrip(&counter{snap{N: 3}}, failing), "restoring: bad snapshot")
}

func TestSeededIsDeterministic(t *testing.T) {
	a, b := machinetest.Seeded(7), machinetest.Seeded(7)
	for range 100 {
		require.Equal(t, a.IntN(1000), b.IntN(1000))
	}
}

type setTimer struct{ machine.SetTimer }
type cancelTimer struct{ machine.CancelTimer }

// TestTimers: timer commands are recognised by their embedded machine types and nothing
// else is; a SetTimer replaces, a CancelTimer drops; Pop hands out due timers earliest
// first (smallest id among equals) and never one not yet due.
func TestTimers(t *testing.T) {
	ts := machinetest.Timers{}
	require.True(t, ts.Record(setTimer{machine.SetTimer{ID: "b", At: 20}}))
	require.True(t, ts.Record(setTimer{machine.SetTimer{ID: "a", At: 20}}))
	require.True(t, ts.Record(setTimer{machine.SetTimer{ID: "c", At: 10}}))
	require.True(t, ts.Record(machine.SetTimer{ID: "d", At: 5}))
	require.True(t, ts.Record(setTimer{machine.SetTimer{ID: "c", At: 30}}), "replaces c's deadline")
	require.True(t, ts.Record(cancelTimer{machine.CancelTimer{ID: "d"}}))
	require.True(t, ts.Record(cancelTimer{machine.CancelTimer{ID: "unknown"}}), "cancelling an unknown timer is harmless")
	require.False(t, ts.Record("not a timer"))
	require.Equal(t, []string{"a at=20", "b at=20", "c at=30"}, ts.List())

	next, ok := ts.Next()
	require.True(t, ok)
	require.Equal(t, int64(20), next)
	_, _, ok = ts.Pop(19)
	require.False(t, ok, "nothing is due before 20")
	var fired []string
	for id, at, ok := ts.Pop(25); ok; id, at, ok = ts.Pop(25) {
		require.LessOrEqual(t, at, int64(25))
		fired = append(fired, id)
	}
	require.Equal(t, []string{"a", "b"}, fired)
	at, ok := ts.Take("c")
	require.True(t, ok)
	require.Equal(t, int64(30), at)
	_, ok = ts.Take("c")
	require.False(t, ok)
	_, ok = ts.Next()
	require.False(t, ok)
	require.Empty(t, ts.List())
}

// TestScriptActions: the actions of one spec, from output lines indented or not, and not
// those of another spec or lines that only mention one.
func TestScriptActions(t *testing.T) {
	dir := fstest.MapFS{
		"a.txt":     {Data: []byte("start\n----\n> start\n  spec S Start x=1\n  cmd  spec S Fake\n")},
		"b.txt":     {Data: []byte("spec S Stop\nspec T Other\n# spec S Comment\n")},
		"notes.md":  {Data: []byte("spec S Ignored\n")},
		"c.txt.bak": {Data: []byte("spec S Ignored\n")},
	}
	require.Equal(t, []string{"Start", "Stop"}, machinetest.ScriptActions(t, dir, "S"))
}

// echo answers every directive with its command name and counts what it handled.
type echo struct{ handled *[]string }

func (e echo) Handle(t *testing.T, d *datadriven.TestData) string {
	*e.handled = append(*e.handled, d.Cmd)
	return d.Cmd
}
func (e echo) Restore(testing.TB) {}

// A failing rapid property leaves testdata/rapid/<Test>/<Test>-<n>.fail (ignored by git);
// Scripts must replay the scripts beside it and never parse the .fail file as a script.
func TestScriptsSkipRapidFailFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "one.txt"), []byte("hello\n----\nhello\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rapid", "TestProp"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rapid", "TestProp", "TestProp-1.fail"),
		[]byte("# 2026/12/01 rapid failure file\nv0.4.8#1234\n0x1\n"), 0o644))
	var handled []string
	machinetest.Scripts(t, dir, func() echo { return echo{&handled} })
	require.Equal(t, []string{"hello", "hello"}, handled, "one script, replayed plain and restore-every-step")
	require.True(t, machinetest.IsScript("testdata/interaction/late_reverse.txt"))
	require.False(t, machinetest.IsScript("testdata/rapid/TestProp/TestProp-1.fail"))
}
