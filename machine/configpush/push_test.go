package configpush_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// fleet drives one machine against instances that answer every command at once (or fail
// it, or stay silent, as the test says) and fires timers when nothing else is pending. It
// checks what the machine does, not how its log reads: these are the behaviours make mutate
// found no property or world test pinned (a re-push's budget, a duplicate push doing
// nothing, a rotated files push, a stray write's answer releasing the queued one).
type fleet struct {
	t        *testing.T
	m        *configpush.Machine
	now      int64
	rng      *rand.Rand
	timers   map[string]int64
	pending  []configpush.Command // issued, not yet answered
	issued   []configpush.Command // every command but timers and outcomes, in order
	outcomes []configpush.Outcome
	events   []machine.SpecEvent
	sets     []configpush.SetTimer         // every timer set, in order
	fail     func(configpush.Command) bool // the instance or store answers with an error
	silent   func(configpush.Command) bool // no answer ever comes
}

func newFleet(t *testing.T) *fleet {
	return &fleet{t: t, m: configpush.New(propOpts), now: 1000, rng: rand.New(rand.NewPCG(1, 2)), timers: map[string]int64{},
		fail: func(configpush.Command) bool { return false }, silent: func(configpush.Command) bool { return false }}
}

func (f *fleet) Emit(e machine.SpecEvent) { f.events = append(f.events, e) }

// on feeds one input and returns the commands it issued (timers and outcomes kept aside).
func (f *fleet) on(in configpush.Input) []configpush.Command {
	var cmds []configpush.Command
	seen := len(f.events)
	defer func() { f.okSaysWhatHappened(in, f.events[seen:]) }()
	for _, c := range f.m.On(&machine.Ctx{Now: f.now, Rand: f.rng, Trace: f}, in) {
		switch c := c.(type) {
		case configpush.SetTimer:
			f.timers[c.ID] = c.At
			f.sets = append(f.sets, c)
		case configpush.CancelTimer:
			delete(f.timers, c.ID)
		case configpush.Outcome:
			f.outcomes = append(f.outcomes, c)
			f.doneSaysTheOutcome(c, f.events[seen:])
		default:
			cmds = append(cmds, c)
		}
	}
	f.issued = append(f.issued, cmds...)
	f.pending = append(f.pending, cmds...)
	return cmds
}

// okSaysWhatHappened: the trace's ok field of the event an answer makes is whether that
// answer succeeded (the spec's trace checks read it).
func (f *fleet) okSaysWhatHappened(in configpush.Input, events []machine.SpecEvent) {
	require.NoError(f.t, okMismatch(in, events))
}

// doneSaysTheOutcome: the trace's Done event of a push that ends states its Outcome: how
// many instances ended each way, and whether the files were written.
func (f *fleet) doneSaysTheOutcome(o configpush.Outcome, events []machine.SpecEvent) {
	if o.Refused != "" || o.SupersededBy != 0 {
		return
	}
	i := slices.IndexFunc(events, func(e machine.SpecEvent) bool { return e.Action == configpush.ActDone })
	require.GreaterOrEqual(f.t, i, 0, "an Outcome without a Done event: %+v", o)
	want := []machine.Field{machine.U("gen", o.Generation), machine.I("confirmed", int64(len(o.Confirmed))), machine.I("ahead", int64(len(o.Ahead))),
		machine.I("unknown", int64(len(o.Unknown))), machine.I("stuck", int64(len(o.Stuck))), machine.B("files_ok", o.FilesErr == "")}
	require.Equal(f.t, want, events[i].Fields, "the Done event of %+v", o)
}

// okMismatch says how an event an answer made has an ok field that is not whether the
// answer succeeded, or nil.
func okMismatch(in configpush.Input, events []machine.SpecEvent) error {
	var err error
	switch in := in.(type) {
	case configpush.FilesWritten:
		err = in.Err
	case configpush.FilesSeen:
		err = in.Err
	case configpush.Reloaded:
		err = in.Err
	case configpush.Observed:
		err = in.Err
	default:
		return nil
	}
	for _, e := range events {
		if i := slices.IndexFunc(e.Fields, func(x machine.Field) bool { return x.Key == "ok" }); i >= 0 && e.Fields[i] != machine.B("ok", err == nil) {
			return fmt.Errorf("%s after %+v says %v", e.Action, in, e.Fields[i])
		}
	}
	return nil
}

func (f *fleet) answer(c configpush.Command) configpush.Input {
	var err error
	if f.fail(c) {
		err = errors.New("boom")
	}
	switch c := c.(type) {
	case configpush.WriteFiles:
		return configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: err}
	case configpush.Reload:
		return configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Err: err}
	case configpush.Observe:
		return configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: c.Generation, Known: true, Err: err}
	case configpush.AwaitFiles:
		return configpush.FilesSeen{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: c.Generation, Err: err}
	}
	f.t.Fatalf("no answer for %T", c)
	return nil
}

// settle answers everything pending, then fires the earliest timer, until nothing is left.
func (f *fleet) settle() {
	for i := 0; ; i++ {
		require.Less(f.t, i, 10000, "the push never settles")
		if len(f.pending) > 0 {
			c := f.pending[0]
			f.pending = f.pending[1:]
			if !f.silent(c) {
				f.on(f.answer(c))
			}
			continue
		}
		if len(f.timers) == 0 {
			return
		}
		id := ""
		for k, at := range f.timers {
			if id == "" || at < f.timers[id] || at == f.timers[id] && k < id {
				id = k
			}
		}
		f.now = max(f.now, f.timers[id])
		delete(f.timers, id)
		f.on(configpush.TimerFired{ID: id})
	}
}

func (f *fleet) last() configpush.Outcome {
	require.NotEmpty(f.t, f.outcomes, "no Outcome")
	return f.outcomes[len(f.outcomes)-1]
}

func push(gen uint64, files render.Files, ids ...string) configpush.Push {
	return configpush.Push{Record: (&world{}).record(gen), Generation: gen, Files: files, Instances: ids}
}

// rotated is generation gen's files after a password rotation: same generation, other bytes.
func rotated(gen uint64) render.Files {
	return render.Files{{Name: "pgdog.toml", Data: fmt.Appendf(nil, "# %d rotated\n", gen)}}
}

func count[T configpush.Command](cmds []configpush.Command, keep func(T) bool) int {
	n := 0
	for _, c := range cmds {
		if c, ok := c.(T); ok && keep(c) {
			n++
		}
	}
	return n
}

func reloadsOf(cmds []configpush.Command, id string) int {
	return count(cmds, func(c configpush.Reload) bool { return c.Instance == id })
}

func anyCmd[T configpush.Command](T) bool { return true }

// Every refusal ends the push at once with an Outcome saying why, and nothing is written or
// reloaded; the Refuse event names the record's published generation (0 without a record).
func TestPushRefusals(t *testing.T) {
	other := push(4, filesFor(4), "a")
	other.Record = &shardmap.Record{Version: 40, Generation: 4, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "other"}}
	v0 := push(4, filesFor(4), "a")
	v0.Record.Version = 0
	for _, tc := range []struct {
		name      string
		p         configpush.Push
		published uint64
	}{
		{"no record", configpush.Push{Generation: 4, Files: filesFor(4), Instances: []string{"a"}}, 0},
		{"version 0", v0, 4},
		{"generation 0", configpush.Push{Record: (&world{}).record(4), Files: filesFor(4), Instances: []string{"a"}}, 4},
		{"unpublished", configpush.Push{Record: (&world{}).record(4), Generation: 5, Files: filesFor(5), Instances: []string{"a"}}, 4},
		{"no files", push(4, nil, "a"), 4},
		{"empty instance", push(4, filesFor(4), "a", ""), 4},
		{"another database", other, 4},
		{"older", push(3, filesFor(3), "a"), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			f.on(push(4, filesFor(4), "a")) // the machine now pushes database app, generation 4
			f.settle()
			require.Empty(t, f.last().Refused)
			f.events, f.issued, f.outcomes = nil, nil, nil
			require.Empty(t, f.on(tc.p), "a refused push issues nothing")
			require.Len(t, f.outcomes, 1)
			require.NotEmpty(t, f.outcomes[0].Refused)
			require.Equal(t, tc.p.Generation, f.outcomes[0].Generation)
			i := slices.IndexFunc(f.events, func(e machine.SpecEvent) bool { return e.Action == configpush.ActRefuse })
			require.GreaterOrEqual(t, i, 0, "no Refuse event")
			pub := slices.IndexFunc(f.events[i].Fields, func(x machine.Field) bool { return x.Key == "published" })
			require.GreaterOrEqual(t, pub, 0)
			require.Equal(t, machine.U("published", tc.published), f.events[i].Fields[pub])
		})
	}
}

// A Push the machine has already carried out (same generation, same files, same
// instances) does nothing: no write, no reload, no second Outcome.
func TestDuplicatePushDoesNothing(t *testing.T) {
	f := newFleet(t)
	f.on(push(4, filesFor(4), "a", "b"))
	f.settle()
	require.ElementsMatch(t, []string{"a", "b"}, f.last().Confirmed)
	n := len(f.outcomes)
	require.Empty(t, f.on(push(4, filesFor(4), "b", "a", "a")))
	f.settle()
	require.Len(t, f.outcomes, n)
	// One more instance: only it is reloaded, and the files are not written again.
	before := len(f.issued)
	f.on(push(4, filesFor(4), "a", "b", "c"))
	f.settle()
	added := f.issued[before:]
	require.Zero(t, count(added, anyCmd[configpush.WriteFiles]))
	require.Equal(t, 1, reloadsOf(added, "c"))
	require.Zero(t, reloadsOf(added, "a")+reloadsOf(added, "b"))
	require.ElementsMatch(t, []string{"a", "b", "c"}, f.last().Confirmed)
}

// A push of a newer generation reloads the instances it names, not the ones of the push it
// replaces.
func TestNewGenerationPushesItsOwnInstances(t *testing.T) {
	f := newFleet(t)
	f.on(push(4, filesFor(4), "a", "b"))
	f.settle()
	before := len(f.issued)
	f.on(push(5, filesFor(5), "a"))
	f.settle()
	added := f.issued[before:]
	require.Equal(t, 1, reloadsOf(added, "a"))
	require.Zero(t, reloadsOf(added, "b"), "b is not part of generation 5's push")
	require.Equal(t, []string{"a"}, f.last().Confirmed)
	require.EqualValues(t, 5, f.last().Generation)
}

// A rotated password is a push of the same generation with other files: it is accepted, the
// new files are written, and every instance of the generation is reloaded with them.
func TestRotatedFilesArePushed(t *testing.T) {
	f := newFleet(t)
	f.on(push(4, filesFor(4), "a", "b"))
	f.settle()
	before := len(f.issued)
	f.on(push(4, rotated(4), "a"))
	f.settle()
	require.Empty(t, f.last().Refused)
	added := f.issued[before:]
	require.Equal(t, 1, count(added, func(c configpush.WriteFiles) bool { return c.Files.Digest() == rotated(4).Digest() }))
	for _, id := range []string{"a", "b"} {
		require.Equal(t, 1, count(added, func(c configpush.Reload) bool { return c.Instance == id && c.Files.Digest() == rotated(4).Digest() }), id)
	}
	require.ElementsMatch(t, []string{"a", "b"}, f.last().Confirmed)
}

// Each start of a step, and each re-push of a step that gave up, has exactly MaxAttempts
// attempts: a files write, an instance's reload, the write of rotated files.
func TestEveryPushHasItsFullBudget(t *testing.T) {
	n := propOpts.MaxAttempts
	t.Run("files", func(t *testing.T) {
		f := newFleet(t)
		f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
		f.on(push(4, filesFor(4), "a"))
		f.settle()
		require.Equal(t, n, count(f.issued, anyCmd[configpush.WriteFiles]))
		require.NotEmpty(t, f.last().FilesErr)
		f.on(push(4, filesFor(4), "a")) // the operator pushes again: a fresh budget
		f.settle()
		require.Equal(t, 2*n, count(f.issued, anyCmd[configpush.WriteFiles]))
		require.NotEmpty(t, f.last().FilesErr)
		f.fail = func(configpush.Command) bool { return false }
		f.on(push(4, filesFor(4), "a"))
		f.settle()
		require.Equal(t, []string{"a"}, f.last().Confirmed)
	})
	t.Run("reload", func(t *testing.T) {
		f := newFleet(t)
		f.fail = func(c configpush.Command) bool { r, ok := c.(configpush.Reload); return ok && r.Instance == "b" }
		f.on(push(4, filesFor(4), "a", "b"))
		f.settle()
		require.Equal(t, n, reloadsOf(f.issued, "b"))
		require.Equal(t, []string{"b"}, f.last().Stuck)
		f.on(push(4, filesFor(4), "a", "b"))
		f.settle()
		require.Equal(t, 2*n, reloadsOf(f.issued, "b"))
		require.Equal(t, 1, reloadsOf(f.issued, "a"), "a confirmed: not reloaded again")
		f.fail = func(configpush.Command) bool { return false }
		f.on(push(4, filesFor(4), "a", "b"))
		f.settle()
		require.ElementsMatch(t, []string{"a", "b"}, f.last().Confirmed)
	})
	t.Run("rotated files", func(t *testing.T) {
		f := newFleet(t)
		f.on(push(4, filesFor(4), "a"))
		f.settle()
		f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
		f.on(push(4, rotated(4), "a"))
		f.settle()
		require.Equal(t, 1+n, count(f.issued, anyCmd[configpush.WriteFiles]))
		require.NotEmpty(t, f.last().FilesErr)
	})
}

// A files write still in flight when a push replaces it is waited for: the new write is
// not issued while the old one may still land (it would land last), and it goes as soon as
// the old one answers, without waiting out the old one's deadline.
func TestReplacedWriteIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		next configpush.Push
	}{{"rotated", push(4, rotated(4), "a")}, {"newer", push(5, filesFor(5), "a")}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t)
			first := f.on(push(4, filesFor(4), "a"))
			require.Len(t, first, 1)
			old := first[0].(configpush.WriteFiles)
			require.Zero(t, count(f.on(tc.next), anyCmd[configpush.WriteFiles]), "written while the replaced write is in flight")
			// An answer that is not the old write's (another attempt) does not release it.
			require.Empty(t, f.on(configpush.FilesWritten{Step: old.Step, Attempt: old.Attempt + 1}))
			f.now++ // well before the old write's deadline
			got := f.on(configpush.FilesWritten{Step: old.Step, Attempt: old.Attempt})
			require.EqualValues(t, 4, f.m.Snapshot().Written, "the replaced write landed: generation 4's files are written")
			require.Equal(t, 1, count(got, func(c configpush.WriteFiles) bool { return c.Files.Digest() == tc.next.Files.Digest() }))
			f.pending = got
			f.settle()
			require.Equal(t, []string{"a"}, f.last().Confirmed)
			require.Equal(t, tc.next.Generation, f.last().Generation)
		})
	}
}

// Zero Options take the defaults, shown by what the machine does: a 10 s deadline per
// attempt, retries 500 ms after the first failure, doubling up to 10 s, and 5 attempts.
func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	f := newFleet(t)
	f.rng = nil // no jitter: the delays are exact
	f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.m = configpush.New(configpush.Options{MaxAttempts: 7})
	f.on(push(4, filesFor(4), "a"))
	f.settle()
	var deadlines, delays []int64
	for i, s := range f.sets {
		if i%2 == 0 {
			deadlines = append(deadlines, s.At)
		} else {
			delays = append(delays, s.At-deadlines[len(deadlines)-1]+10_000)
		}
	}
	require.Len(t, deadlines, 7)
	require.Equal(t, []int64{500, 1000, 2000, 4000, 8000, 10_000}, delays, "each retry's delay after the failed attempt")
	require.EqualValues(t, 1000+10_000, deadlines[0], "the first attempt's deadline")

	f = newFleet(t)
	f.m = configpush.New(configpush.Options{})
	f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.on(push(4, filesFor(4), "a"))
	f.settle()
	require.Equal(t, 5, count(f.issued, anyCmd[configpush.WriteFiles]))
}

// TestBackoffJittered: with ctx.Rand each retry waits between half its delay and its delay
// (Backoff doubling to MaxBackoff), spread, so instances failing together do not retry in
// step; TestZeroOptionsTakeTheDefaults has the exact delays without it.
func TestBackoffJittered(t *testing.T) {
	nominal := []int64{500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000, 10_000, 10_000}
	f := newFleet(t)
	f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.m = configpush.New(configpush.Options{MaxAttempts: len(nominal) + 1})
	f.on(push(4, filesFor(4), "a"))
	f.settle()
	var deadline int64
	var delays []int64
	for i, s := range f.sets {
		if i%2 == 0 {
			deadline = s.At
		} else {
			delays = append(delays, s.At-deadline+10_000)
		}
	}
	require.Len(t, delays, len(nominal))
	exact := 0
	for i, d := range delays {
		require.True(t, d >= nominal[i]-nominal[i]/2 && d <= nominal[i], "retry %d waits %d ms, nominal %d", i+1, d, nominal[i])
		if d == nominal[i] {
			exact++
		}
	}
	require.Less(t, exact, 3, "the delays are jittered: %v", delays)

	// The spread reaches both ends: at a 4 ms delay, 30 retries wait 2, 3 and 4 ms.
	f = newFleet(t)
	f.fail = func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return ok }
	f.m = configpush.New(configpush.Options{Backoff: 4 * time.Millisecond, MaxBackoff: 4 * time.Millisecond, MaxAttempts: 31})
	f.on(push(4, filesFor(4), "a"))
	f.settle()
	waits := map[int64]bool{}
	for i, s := range f.sets {
		if i%2 == 0 {
			deadline = s.At
		} else {
			waits[s.At-deadline+10_000] = true
		}
	}
	require.Equal(t, map[int64]bool{2: true, 3: true, 4: true}, waits)
}

// A push restored after it ended has no files (the snapshot keeps only their digest). When
// the same push comes again to retry a stuck instance, the instance is reloaded with the
// pushed files, not with none.
func TestRestoredPushRetriesWithTheFiles(t *testing.T) {
	f := newFleet(t)
	f.fail = func(c configpush.Command) bool { r, ok := c.(configpush.Reload); return ok && r.Instance == "b" }
	f.on(push(4, filesFor(4), "a", "b"))
	f.settle()
	require.Equal(t, []string{"b"}, f.last().Stuck)
	b, err := json.Marshal(f.m.Snapshot())
	require.NoError(t, err)
	var s configpush.Snapshot
	require.NoError(t, json.Unmarshal(b, &s))
	f.m, err = configpush.Restore(s, propOpts)
	require.NoError(t, err)
	f.fail = func(configpush.Command) bool { return false }
	before := len(f.issued)
	f.on(push(4, filesFor(4), "a", "b"))
	f.settle()
	added := f.issued[before:]
	require.Equal(t, 1, count(added, func(c configpush.Reload) bool {
		return c.Instance == "b" && c.Files.Digest() == filesFor(4).Digest() && len(c.Files) > 0
	}))
	require.ElementsMatch(t, []string{"a", "b"}, f.last().Confirmed)
}

// A replaced write that fails wrote nothing: the machine does not count its generation as
// written, and the queued write goes at once.
func TestReplacedWriteThatFailsWroteNothing(t *testing.T) {
	f := newFleet(t)
	old := f.on(push(4, filesFor(4), "a"))[0].(configpush.WriteFiles)
	f.on(push(5, filesFor(5), "a"))
	got := f.on(configpush.FilesWritten{Step: old.Step, Attempt: old.Attempt, Err: errors.New("disk full")})
	require.Zero(t, f.m.Snapshot().Written)
	require.Equal(t, 1, count(got, func(c configpush.WriteFiles) bool { return c.Generation == 5 }))
}

// A push superseded while its instances are being reloaded leaves no timer of its own
// armed: the driver is not asked to wake the machine for a push that ended.
func TestSupersededPushLeavesNoTimer(t *testing.T) {
	f := newFleet(t)
	f.silent = func(c configpush.Command) bool { _, ok := c.(configpush.Reload); return ok }
	f.on(push(4, filesFor(4), "a", "b"))
	f.pending = slices.DeleteFunc(f.pending, func(c configpush.Command) bool { _, ok := c.(configpush.WriteFiles); return !ok })
	f.on(f.answer(f.pending[0])) // files written: a and b are being reloaded
	f.pending = nil
	require.Contains(t, f.timers, "g4/instance/a")
	f.silent = func(configpush.Command) bool { return false }
	f.on(push(5, filesFor(5), "a", "b"))
	for id := range f.timers {
		require.NotContains(t, id, "g4/", "timer %s of the superseded push still armed", id)
	}
	f.settle()
	require.ElementsMatch(t, []string{"a", "b"}, f.last().Confirmed)
	require.EqualValues(t, 5, f.last().Generation)
}

// A Push is logged by its record's version (none: 0), never by its files' contents; a Push
// without a record, which the machine refuses, can be logged too.
func TestPushLogValue(t *testing.T) {
	p := push(4, filesFor(4), "a")
	require.Contains(t, p.LogValue().String(), "version=40")
	require.NotContains(t, p.LogValue().String(), "# 4")
	p.Record = nil
	require.Contains(t, p.LogValue().String(), "version=0")
}

// Every attempt waits StepTimeout for its answer: the files write's deadline and then each
// instance's are StepTimeout after the command went out.
func TestAttemptsWaitTheirStepTimeout(t *testing.T) {
	f := newFleet(t)
	write := f.on(push(4, filesFor(4), "a"))[0].(configpush.WriteFiles)
	require.Equal(t, f.now+propOpts.StepTimeout.Milliseconds(), f.timers[write.Step])
	f.now += 250
	reload := f.on(configpush.FilesWritten{Step: write.Step, Attempt: write.Attempt})
	require.Equal(t, 1, count(reload, anyCmd[configpush.Reload]))
	require.Equal(t, f.now+propOpts.StepTimeout.Milliseconds(), f.timers["g4/instance/a"])
}

// A reply is taken for the attempt it answers: a late failure of an attempt that timed out
// says nothing of the retry in flight; a late success of it does (the same write landed);
// a repeated success changes nothing; and after rotated files are pushed, a late success of
// the old files' write is not taken for the new one (its instances would be reloaded with
// files never written).
func TestRepliesMatchTheirAttempt(t *testing.T) {
	timedOut := func(t *testing.T) (*fleet, configpush.WriteFiles) {
		f := newFleet(t)
		first := f.on(push(4, filesFor(4), "a"))[0].(configpush.WriteFiles)
		f.now = f.timers[first.Step]
		f.on(configpush.TimerFired{ID: first.Step}) // attempt 1 timed out: backoff
		f.now = f.timers[first.Step]
		retry := f.on(configpush.TimerFired{ID: first.Step})
		require.Equal(t, 1, count(retry, func(c configpush.WriteFiles) bool { return c.Attempt == 2 }))
		return f, first
	}
	t.Run("late failure", func(t *testing.T) {
		f, first := timedOut(t)
		require.Empty(t, f.on(configpush.FilesWritten{Step: first.Step, Attempt: 1, Err: errors.New("late")}))
		require.Equal(t, configpush.StepAwaiting, f.m.Snapshot().Push.FilesStep.State, "attempt 2 still awaited")
	})
	t.Run("late success", func(t *testing.T) {
		f, first := timedOut(t)
		got := f.on(configpush.FilesWritten{Step: first.Step, Attempt: 1})
		require.Equal(t, 1, reloadsOf(got, "a"))
		require.Empty(t, f.on(configpush.FilesWritten{Step: first.Step, Attempt: 2}), "a second success changes nothing")
		require.Empty(t, f.on(configpush.FilesWritten{Step: first.Step, Attempt: 1}), "nor a repeated one")
	})
	t.Run("success during backoff", func(t *testing.T) {
		f := newFleet(t)
		first := f.on(push(4, filesFor(4), "a"))[0].(configpush.WriteFiles)
		f.now = f.timers[first.Step]
		f.on(configpush.TimerFired{ID: first.Step}) // attempt 1 timed out: backoff
		require.Equal(t, configpush.StepBackoff, f.m.Snapshot().Push.FilesStep.State)
		got := f.on(configpush.FilesWritten{Step: first.Step, Attempt: 1}) // it landed after all
		require.Equal(t, 1, reloadsOf(got, "a"), "the files are written: no need to wait out the backoff")
	})
	t.Run("old files", func(t *testing.T) {
		f := newFleet(t)
		first := f.on(push(4, filesFor(4), "a"))[0].(configpush.WriteFiles)
		f.pending = nil
		f.on(configpush.FilesWritten{Step: first.Step, Attempt: first.Attempt})
		f.settle()
		next := f.on(push(4, rotated(4), "a"))
		require.Equal(t, 1, count(next, anyCmd[configpush.WriteFiles]))
		require.Empty(t, f.on(configpush.FilesWritten{Step: first.Step, Attempt: first.Attempt}), "the old files' write answered again")
	})
}

// TestOutcomeString: an Outcome's log line names each of its parts that is set, and only
// those.
func TestOutcomeString(t *testing.T) {
	require.Equal(t, "Outcome gen=4", configpush.Outcome{Generation: 4}.String())
	full := configpush.Outcome{Generation: 4, Refused: "no record", FilesErr: "boom", SupersededBy: 5,
		Confirmed: []string{"a", "b"}, Ahead: []string{"c"}, Unknown: []string{"d"}, Stuck: []string{"e"}}
	require.Equal(t, `Outcome gen=4 refused="no record" files_err="boom" superseded_by=5 confirmed=(a,b) ahead=(c) unknown=(d) stuck=(e)`, full.String())
}
