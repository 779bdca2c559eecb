// Package machinetest holds what the tests of every machine under machine/ share: the
// snapshot round trip a driver performs, the timers it keeps, the choosers that drive
// random scenarios, and the runner and argument helpers of the datadriven interaction
// scripts. Import it from _test files only.
package machinetest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"pgregory.net/rapid"

	"loam.dev/router/machine"
)

// TB is the part of testing.TB (and of *rapid.T) the helpers need.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// RoundTrip does to m what a driver does across a restart: encode its snapshot as JSON,
// decode it into a fresh value and restore a machine from that. It fails t when the
// restored machine's snapshot does not encode to the same JSON, so a field that does not
// survive persistence is caught by every scenario that calls it.
func RoundTrip[S any, M interface{ Snapshot() S }](t TB, m M, restore func(S) (M, error)) M {
	t.Helper()
	b, err := json.Marshal(m.Snapshot())
	if err != nil {
		t.Fatalf("encoding the snapshot: %v", err)
	}
	var s S
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("decoding the snapshot: %v\n%s", err, b)
	}
	r, err := restore(s)
	if err != nil {
		t.Fatalf("restoring: %v\n%s", err, b)
	}
	b2, err := json.Marshal(r.Snapshot())
	if err != nil {
		t.Fatalf("encoding the restored snapshot: %v", err)
	}
	if string(b) != string(b2) {
		t.Fatalf("the snapshot does not survive encode, decode and restore:\nbefore %s\nafter  %s", b, b2)
	}
	return r
}

// Chooser makes a random scenario's choices. Properties use Rapid (a failure shrinks to a
// short scenario); mutant tests use Seeded, since a mutant must be caught within a bounded
// number of seeds and rapid reports a catch as a failure.
type Chooser interface {
	// IntN returns a choice in [0, n).
	IntN(n int) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) IntN(n int) int { return rapid.IntRange(0, n-1).Draw(c.t, "choice") }

// Rapid draws choices from t.
func Rapid(t *rapid.T) Chooser { return rapidChooser{t} }

// Seeded draws choices from a PCG generator seeded with seed.
func Seeded(seed uint64) Chooser { return rand.New(rand.NewPCG(seed, 0)) }

// Arg reads the optional argument key of a directive, or def.
func Arg[T any](t testing.TB, d *datadriven.TestData, key string, def T) T {
	t.Helper()
	if !d.HasArg(key) {
		return def
	}
	var v T
	d.ScanArgs(t, key, &v)
	return v
}

// Need reads the argument key of a directive, failing t when it is absent.
func Need[T any](t testing.TB, d *datadriven.TestData, key string) T {
	t.Helper()
	var v T
	d.ScanArgs(t, key, &v)
	return v
}

// Vals reads a list argument, key=(a,b,c); key=() is the empty list.
func Vals(d *datadriven.TestData, key string) []string {
	a, ok := d.Arg(key)
	if !ok || len(a.Vals) == 1 && a.Vals[0] == "" {
		return nil
	}
	return slices.Clone(a.Vals)
}

// Err reads err=(some words) as an error, or nil when absent.
func Err(d *datadriven.TestData) error {
	if a, ok := d.Arg("err"); ok {
		return errors.New(strings.Join(a.Vals, " "))
	}
	return nil
}

// Harness drives one machine through a datadriven script. Handle runs one directive and
// returns its output. Restore replaces the machine by one restored from its snapshot, as a
// driver does after a restart (RoundTrip, for a snapshot a driver persists as JSON); it
// does nothing while the script has not made a machine yet.
type Harness interface {
	Handle(t *testing.T, d *datadriven.TestData) string
	Restore(t testing.TB)
}

// Scripts replays every datadriven script (*.txt) under dir twice, each time with a new harness,
// against the same expected output: once as written, and once with the machine restored
// before every directive (Harness.Restore). A scenario therefore also tests restarting
// from every snapshot it passes through. Regenerate the expected output with go test
// -rewrite, and read the diff before committing it.
func Scripts[H Harness](t *testing.T, dir string, newHarness func() H) {
	for _, mode := range []string{"plain", "restore-every-step"} {
		t.Run(mode, func(t *testing.T) {
			datadriven.Walk(t, dir, func(t *testing.T, path string) {
				if !IsScript(path) {
					return // e.g. testdata/rapid/*.fail, which rapid leaves after a failing property
				}
				h := newHarness()
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					if mode == "restore-every-step" {
						h.Restore(t)
					}
					return h.Handle(t, d)
				})
			})
		})
	}
}

// IsScript reports whether path names an interaction script: a "*.txt" file. Scripts runs
// only those, so the files other tools leave under testdata (rapid's testdata/rapid/*.fail
// after a failing property, ignored by git) are never parsed as scripts.
func IsScript(path string) bool { return strings.HasSuffix(path, ".txt") }

// ScriptActions returns every action of spec that the scenario files (*.txt) in dir show
// being emitted (their "spec <Spec> <Action> ..." lines, indented or not); pass
// os.DirFS("testdata"). With
// the scripts verified by Scripts, comparing it with a machine's action list shows every
// action is exercised.
func ScriptActions(t testing.TB, dir fs.FS, spec string) []string {
	t.Helper()
	paths, err := fs.Glob(dir, "*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files (%v)", err)
	}
	seen := map[string]bool{}
	prefix := "spec " + spec + " "
	for _, p := range paths {
		b, err := fs.ReadFile(dir, p)
		if err != nil {
			t.Fatalf("%v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), prefix); ok {
				seen[strings.Fields(rest)[0]] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Timers plays a driver's timers in a scenario: the deadline of every timer the machine
// has set and not cancelled, by id. Make one with Timers{}; a driver that dies loses them
// all (start a new one).
type Timers map[string]int64

// Record keeps what a timer command asks for (a SetTimer replaces a pending timer of the
// same id, a CancelTimer drops it) and reports whether c was one; other commands are left
// to the caller. It recognises any machine's timer commands as the driver does, by the
// methods of machine.SetTimer and machine.CancelTimer they embed.
func (ts Timers) Record(c any) bool {
	switch c := c.(type) {
	case interface{ Timer() machine.SetTimer }:
		ts[c.Timer().ID] = c.Timer().At
		return true
	case interface{ CancelledTimer() machine.CancelTimer }:
		delete(ts, c.CancelledTimer().ID)
		return true
	}
	return false
}

// Pop removes and returns the timer due at now (deadline at or before it) with the
// earliest deadline, the smallest id among equals. Fire timers one Pop at a time: what a
// fired timer's input cancels or sets is then seen by the next Pop.
func (ts Timers) Pop(now int64) (id string, at int64, ok bool) {
	for k, v := range ts {
		if v <= now && (!ok || v < at || v == at && k < id) {
			id, at, ok = k, v, true
		}
	}
	if ok {
		delete(ts, id)
	}
	return id, at, ok
}

// Next returns the earliest deadline pending.
func (ts Timers) Next() (at int64, ok bool) {
	for _, v := range ts {
		if !ok || v < at {
			at, ok = v, true
		}
	}
	return at, ok
}

// Take removes timer id and returns its deadline.
func (ts Timers) Take(id string) (at int64, ok bool) {
	at, ok = ts[id]
	delete(ts, id)
	return at, ok
}

// List describes the pending timers, "<id> at=<deadline>" sorted by id.
func (ts Timers) List() []string {
	out := make([]string, 0, len(ts))
	for id, at := range ts {
		out = append(out, id+" at="+strconv.FormatInt(at, 10))
	}
	slices.Sort(out)
	return out
}
