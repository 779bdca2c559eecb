package configpush_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/machinetest"
)

// world is the scenario: a store publishing generations, a driver that delivers, drops,
// delays and duplicates replies, fires timers, and dies; and the checkers watching every
// command the machine issues.
type world struct {
	t      machinetest.TB
	c      machinetest.Chooser
	opts   configpush.Options
	m      *configpush.Machine
	now    int64
	rng    *rand.Rand
	pub    uint64               // the generation the store publishes
	timers map[string]int64     // pending timers
	out    []configpush.Command // issued commands whose reply may still come
	steps  *check.Steps         // the step invariants, shared with the simulator
	errs   []error              // every violation, in order
}

var instances = []string{"a", "b", "c"}

func newWorld(t machinetest.TB, c machinetest.Chooser, opts configpush.Options) *world {
	return &world{
		t: t, c: c, opts: opts, m: configpush.New(opts), now: 1000, pub: 4,
		rng:    rand.New(rand.NewChaCha8([32]byte{1})),
		timers: map[string]int64{}, steps: check.NewSteps(),
	}
}

// restore is a new driver's restore: the snapshot as the store keeps it (JSON, without the
// files), and the files rendered again from the store's record. A snapshot the record
// cannot have produced is refused, which is a violation: the machine wrote it.
func (w *world) restore() {
	b, err := json.Marshal(w.m.Snapshot())
	if err != nil {
		w.violate("encoding the snapshot: %v", err)
		return
	}
	var s configpush.Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		w.violate("decoding the snapshot: %v", err)
		return
	}
	m, err := configpush.RestoreWithFiles(s, w.record(w.pub), filesFor(w.pub), w.opts)
	if err != nil {
		w.violate("restoring: %v", err)
		return
	}
	w.m = m
}

func (w *world) violate(format string, a ...any) {
	w.errs = append(w.errs, fmt.Errorf(format, a...))
}

func (w *world) step(in configpush.Input) {
	ctx := &machine.Ctx{Now: w.now, Rand: w.rng, Trace: machine.Discard}
	for _, c := range w.m.On(ctx, in) {
		w.check(c)
		switch c := c.(type) {
		case configpush.SetTimer:
			w.timers[c.ID] = c.At
		case configpush.CancelTimer:
			delete(w.timers, c.ID)
		case configpush.Outcome:
			w.steps.Outcome(c.Generation, c.Refused != "")
		default:
			w.out = append(w.out, c)
		}
	}
}

// check is every invariant on one issued command.
func (w *world) check(c configpush.Command) {
	var v *detsim.Violation
	switch c := c.(type) {
	case configpush.WriteFiles:
		v = w.steps.WriteFiles(w.now, c.Step, c.Generation, w.pub, w.now+w.opts.StepTimeout.Milliseconds())
	case configpush.Reload:
		v = w.steps.Reload(w.now, c.Instance, c.Generation)
	}
	w.report(v)
}

func (w *world) report(v *detsim.Violation) {
	if v != nil {
		w.violate("%s: %s", v.Invariant, v.Detail)
	}
}

func (w *world) record(gen uint64) *shardmap.Record {
	return &shardmap.Record{Version: gen * 10, Generation: gen, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
}

func filesFor(gen uint64) render.Files {
	return render.Files{{Name: "pgdog.toml", Data: fmt.Appendf(nil, "# %d\n", gen)}}
}

// reply answers an issued command: success, failure, or (for Observe) what was seen.
func (w *world) reply(c configpush.Command) configpush.Input {
	var err error
	if w.c.IntN(3) == 0 {
		err = errors.New("boom")
	}
	switch c := c.(type) {
	case configpush.WriteFiles:
		if err == nil {
			w.steps.Written(c.Generation)
		}
		w.steps.Answered(c.Step)
		return configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: err}
	case configpush.Reload:
		return configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Err: err}
	case configpush.Observe:
		gens := []uint64{c.Generation, c.Generation, c.Generation - 1, c.Generation + 1}
		return configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance,
			Generation: gens[w.c.IntN(len(gens))], Known: w.c.IntN(5) != 0, Err: err}
	}
	panic(fmt.Sprintf("no reply for %T", c))
}

func (w *world) fireEarliest() bool {
	if len(w.timers) == 0 {
		return false
	}
	ids := make([]string, 0, len(w.timers))
	for id := range w.timers {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return int(w.timers[a] - w.timers[b]) })
	id := ids[0]
	w.now = max(w.now, w.timers[id])
	delete(w.timers, id)
	w.step(configpush.TimerFired{ID: id})
	return true
}

func (w *world) run(steps int) error {
	for range steps {
		switch w.c.IntN(10) {
		case 0: // a push: the published generation, or an unsafe one
			gen, rec := w.pub, w.record(w.pub)
			switch w.c.IntN(4) {
			case 1:
				gen = w.pub + 1 // rendered for a target the store does not publish yet
			case 2:
				gen = w.pub - 1 // older than the record it comes with
			case 3:
				gen, rec = w.pub-1, w.record(w.pub-1) // a stale read, delivered late
			}
			ids := instances[:1+w.c.IntN(len(instances))]
			w.step(configpush.Push{Record: rec, Generation: gen, Files: filesFor(gen), Instances: ids})
		case 1: // the store publishes a newer generation
			w.pub++
		case 2, 3, 4: // a reply to something in flight (it stays in flight: duplicates happen)
			if len(w.out) > 0 {
				i := w.c.IntN(len(w.out))
				c := w.out[i]
				if w.c.IntN(3) > 0 {
					w.out = slices.Delete(w.out, i, i+1)
				}
				w.step(w.reply(c))
			}
		case 5: // a reply is lost
			if len(w.out) > 0 {
				i := w.c.IntN(len(w.out))
				w.out = slices.Delete(w.out, i, i+1)
			}
		case 6, 7: // time passes to the next timer
			w.fireEarliest()
		case 8: // the driver dies; a new one restores the snapshot (replies in flight may
			// still arrive: the old driver's requests were sent)
			w.restore()
			w.timers = map[string]int64{}
			w.step(configpush.Restarted{})
		case 9:
			w.now += int64(w.c.IntN(500))
		}
	}
	// Nothing answers any more: every push must still end, by giving up on what is silent.
	w.out = nil
	for i := 0; w.fireEarliest(); i++ {
		if i > 10000 {
			return fmt.Errorf("timers still pending after 10000 firings")
		}
	}
	w.report(w.steps.Ended(w.now))
	if len(w.errs) > 0 {
		return errors.Join(w.errs...)
	}
	if s := w.m.Snapshot(); s.Push != nil && !s.Push.Done {
		return fmt.Errorf("push of generation %d still running with nothing in flight", s.Push.Generation)
	}
	return nil
}

var propOpts = configpush.Options{StepTimeout: time.Second, Backoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, MaxAttempts: 3}

// TestPushProperties: over random pushes, replies, losses, timeouts and restarts, files are
// written only for published generations, generations written only increase, no two files
// writes are in flight together, no instance is reloaded before its generation's files
// are written, and every push ends with an Outcome even when nothing answers.
func TestPushProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := newWorld(t, machinetest.Rapid(t), propOpts)
		require.NoError(t, w.run(rapid.IntRange(1, 80).Draw(t, "steps")))
	})
}

// TestPushMutantsAreCaught: each mutant trips the property it breaks within 200 seeds (it
// may trip others too: a regressing machine also confuses its own step ids).
func TestPushMutantsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		mutant configpush.Mutant
		want   string
	}{
		{configpush.MutantWriteUnpublished, check.InvFilesOnlyPublished},
		{configpush.MutantRegress, check.InvGenerationsIncrease},
		{configpush.MutantNoStrayWait, check.InvOneWrite},
		{configpush.MutantReloadEarly, check.InvReloadAfterFiles},
		{configpush.MutantSilentGiveUp, check.InvPushEnds},
	} {
		t.Run(tc.mutant.String(), func(t *testing.T) {
			opts := propOpts
			opts.Mutant = tc.mutant
			for seed := uint64(1); seed <= 200; seed++ {
				w := newWorld(t, machinetest.Seeded(seed), opts)
				if err := w.run(80); err != nil && strings.Contains(err.Error(), tc.want) {
					t.Logf("caught at seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("mutant %v was not caught in 200 seeds", tc.mutant)
		})
	}
}
