package cutover_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// chooser is where a run's choices come from: rapid (shrinkable) or a seeded rng.
type chooser interface {
	pick(n int, label string) int
}

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) pick(n int, label string) int {
	return rapid.IntRange(0, n-1).Draw(c.t, label)
}

type rngChooser struct{ r *rand.Rand }

func (c rngChooser) pick(n int, _ string) int { return c.r.IntN(n) }

// runConfig is one random cutover: its shape and how hostile the world is.
type runConfig struct {
	instances  int
	designated int
	attempts   int
	instAtt    int // Options.InstanceAttempts (0: Attempts)
	finalize   int // after resume: 0 finalize, 1 reverse, 2 finalize on its own after a delay
	chaos      int // steps of the hostile phase
	mutants    cutover.Mutants
	foreign    bool // allow writes to the record by someone else (may halt or abort)
	trace      *machine.Recorder
	deadline   int64 // CatchUpDeadline; 0 means 60 s
	firstTask  int64 // the first task id the designated PgDog hands out (0 after its start)
	otherDB    bool  // another database on d runs a replication task (world.otherDB)
	otherEarly bool  // with otherDB, it is a copy started right after this one's (world.otherEarly)
	otherLate  bool  // another database's copy starts on d at the forward CUTOVER (world.otherLate)
	slotLag    bool  // the copy's slot lag is shown while it syncs (world.slotLagSyncing)
	stuckLag   bool  // the copy's lag never falls (world.stuckLag)
	settle     int64 // Options.ReverseSettle; 0: the world's checkout_timeout
}

// runResult is what a run saw.
type runResult struct {
	done       *cutover.Done
	violations []string
	log        []string
	published  bool
}

// run drives one cutover through the world. In the hostile phase every command may fail
// (having taken effect or not), answers come in any order, stale answers are repeated,
// the driver restarts, timers fire late and the operator decides at random moments. Then
// the world turns reliable and the cutover must end.
func run(c chooser, cfg runConfig) runResult {
	var names []string
	for i := range cfg.instances {
		names = append(names, fmt.Sprintf("pgdog-%d", i+1))
	}
	d := names[cfg.designated]
	w := newWorld(fixture(), names, d, cfg.firstTask)
	w.otherDB, w.slotLagSyncing, w.stuckLag = cfg.otherDB, cfg.slotLag, cfg.stuckLag
	w.otherEarly = cfg.otherDB && cfg.otherEarly
	w.otherLate = cfg.otherLate
	w.lag = int64(c.pick(3000, "lag"))
	w.syncPolls = c.pick(3, "syncPolls")
	if cfg.stuckLag {
		w.lag = 5000 // over the threshold for good
	}
	if cfg.deadline == 0 {
		cfg.deadline = 60_000
	}
	// The instances' checkout_timeout, and the reverse's ReverseSettle that waits it out.
	w.checkout = 2000
	opts := cutover.Options{LagThreshold: 1000, PollEvery: 1000, CatchUpDeadline: cfg.deadline, RetryAfter: 100,
		Attempts: cfg.attempts, InstanceAttempts: cfg.instAtt, Grace: 5000, ReverseSettle: cmp.Or(cfg.settle, w.checkout), Mutants: cfg.mutants}
	if cfg.finalize == 2 {
		opts.FinalizeAfter = 3000
	}
	var res runResult
	m := cutover.New()
	rng := rand.New(rand.NewPCG(7, 9))
	now := int64(1000)
	w.clock = &now
	var pending []cutover.Command
	var answered []cutover.Input
	// lateCuts are CUTOVERs answered with a failure that did not reach the instance, whose
	// request still arrives later: outside the driver's contract (an answer is final), but
	// a network can do it, and the fence must make it harmless.
	var lateCuts []cutover.Command
	timers := map[string]int64{}
	feed := func(in cutover.Input) {
		var sink machine.TraceSink = machine.Discard
		if cfg.trace != nil {
			sink = cfg.trace
		}
		w.failures.Answer(check.AnswerOf(in))
		cmds := m.On(&machine.Ctx{Now: now, Rand: rng, Trace: sink}, in)
		for _, cmd := range cmds {
			res.log = append(res.log, cmd.String())
			switch cmd := cmd.(type) {
			case cutover.SetTimer:
				timers[cmd.ID] = cmd.At
			case cutover.CancelTimer:
				delete(timers, cmd.ID)
			case cutover.Done:
				res.done = &cmd
				w.checkEnd(cmd)
			case cutover.Alert:
				w.alert(cmd)
				if v := w.failures.Alert(now, cmd.Step, cmd.Reason); v != nil {
					w.violate("%s: %s", v.Invariant, v.Detail)
				}
			case cutover.WriteRecord:
				if cmd.Record.Generation == w.g+1 {
					res.published = true
				}
				pending = append(pending, cmd)
			default:
				w.send(cmd)
				pending = append(pending, cmd)
			}
		}
	}
	fire := func() bool {
		id, at := "", int64(0)
		for k, v := range timers {
			if id == "" || v < at || v == at && k < id {
				id, at = k, v
			}
		}
		if id == "" {
			return false
		}
		delete(timers, id)
		now = max(now, at)
		feed(cutover.TimerFired{ID: id})
		return true
	}
	feed(cutover.Start{Record: fixture(), Plan: cutover.Plan{Designated: d, Instances: names, Role: "app", Publication: "app_pub", Options: opts}})

	for i := 0; res.done == nil && i < cfg.chaos; i++ {
		switch k := c.pick(100, "action"); {
		case k < 60 && len(pending) > 0:
			j := c.pick(len(pending), "which")
			cmd := pending[j]
			pending = slices.Delete(pending, j, j+1)
			var in cutover.Input
			switch f := c.pick(20, "fault"); {
			case f < 13:
				in = w.apply(cmd, nil, false)
			case f < 17:
				applied := c.pick(2, "applied") == 1
				in = w.apply(cmd, errors.New("unreachable"), applied)
				if _, ok := cmd.(cutover.Cutover); ok && !applied && c.pick(2, "lands late") == 1 {
					lateCuts = append(lateCuts, cmd)
				}
			case f < 18:
				if cut, ok := cmd.(cutover.Cutover); ok {
					w.swapAndFail(cut)
					in = cutover.Reply{Step: cut.Step, Err: errors.New("58000 cutover failed")}
				} else {
					in = w.apply(cmd, nil, false)
				}
			default:
				if _, ok := cmd.(cutover.WriteRecord); ok && cfg.foreign {
					w.store.Version++ // a harmless rewrite: the machine rebases
					if c.pick(4, "foreignGen") == 0 {
						w.store.Generation += 10
						w.foreign = true
					}
				}
				in = w.apply(cmd, nil, false)
			}
			answered = append(answered, in)
			feed(in)
		case k < 63 && len(answered) > 0:
			feed(answered[c.pick(len(answered), "stale")]) // a duplicate or late answer
		case k < 80:
			now += int64(c.pick(2500, "advance"))
			due := ""
			for id, at := range timers {
				if at <= now && (due == "" || id < due) {
					due = id // the same one every time: a run is a function of its choices
				}
			}
			if due != "" {
				delete(timers, due)
				feed(cutover.TimerFired{ID: due})
			}
		case k < 83:
			for _, cmd := range pending {
				if c.pick(2, "ranBeforeCrash") == 1 {
					w.ranUnanswered(cmd)
				}
			}
			w.crash()
			pending, answered, timers = nil, nil, map[string]int64{}
			b, err := json.Marshal(m.Snapshot())
			if err != nil {
				panic(err)
			}
			var s cutover.Snapshot
			if err := json.Unmarshal(b, &s); err != nil {
				panic(err)
			}
			m, err = cutover.Restore(s)
			if err != nil {
				panic(err)
			}
			feed(cutover.Restarted{})
		case k < 85:
			if c.pick(2, "decision") == 0 {
				feed(cutover.Finalize{})
			} else {
				feed(cutover.Reverse{})
			}
		case k < 90:
			// The late answer of an earlier attempt of a step whose retry is in flight:
			// the retry has not run yet, so it says nothing about it.
			var late []cutover.Input
			for _, in := range answered {
				if slices.ContainsFunc(pending, func(p cutover.Command) bool { return baseStep(stepOf(p)) == baseStep(inputStep(in)) }) {
					late = append(late, in)
				}
			}
			if len(late) > 0 {
				feed(late[c.pick(len(late), "late")])
			}
		case k < 93 && len(lateCuts) > 0:
			j := c.pick(len(lateCuts), "late cutover")
			w.landLate(lateCuts[j].(cutover.Cutover))
			lateCuts = slices.Delete(lateCuts, j, j+1)
		case k >= 93 && k < 96:
			// An instance's process restarts: it routes by the files, holds nothing, and
			// (d) its tasks are gone.
			w.restartInstance(names[c.pick(len(names), "restart instance")])
		}
	}
	// The world turns reliable: answer everything, fire timers, decide.
	reversed := false
	for i := 0; res.done == nil && i < 5000; i++ {
		if len(pending) > 0 {
			cmd := pending[0]
			pending = pending[1:]
			feed(w.apply(cmd, nil, false))
			continue
		}
		if fire() {
			continue
		}
		if cfg.finalize == 1 && !reversed {
			reversed = true
			feed(cutover.Reverse{})
			continue
		}
		feed(cutover.Finalize{}) // also when Reverse was refused
		if len(pending) == 0 && len(timers) == 0 && res.done == nil {
			res.violations = append(res.violations, "stuck: nothing in flight, no timer, not done")
			break
		}
	}
	if res.done == nil {
		res.violations = append(res.violations, "no Done after the world turned reliable")
	}
	// The CUTOVERs still travelling arrive after Done: the fences Done leaves must make
	// them harmless too (a reverse's, landing on a stream finalize failed to stop, swaps d
	// back onto the old shards).
	for _, c := range lateCuts {
		w.landLate(c.(cutover.Cutover))
	}
	res.violations = append(res.violations, w.violations...)
	return res
}

func drawConfig(t *rapid.T) runConfig {
	n := rapid.IntRange(1, 4).Draw(t, "instances")
	return runConfig{
		instances:  n,
		designated: rapid.IntRange(0, n-1).Draw(t, "designated"),
		attempts:   rapid.IntRange(1, 3).Draw(t, "attempts"),
		instAtt:    rapid.IntRange(0, 1).Draw(t, "instanceAttempts"),
		finalize:   rapid.IntRange(0, 2).Draw(t, "finalize"),
		chaos:      rapid.IntRange(0, 300).Draw(t, "chaos"),
		foreign:    rapid.Bool().Draw(t, "foreign"),
		// A freshly started PgDog's first task is 0; one that ran tasks before hands out more.
		firstTask:  rapid.SampledFrom([]int64{0, 7}).Draw(t, "firstTask"),
		otherDB:    rapid.Bool().Draw(t, "otherDB"),
		otherEarly: rapid.Bool().Draw(t, "otherEarly"),
		otherLate:  rapid.Bool().Draw(t, "otherLate"),
		slotLag:    rapid.Bool().Draw(t, "slotLag"),
	}
}

// TestPropertySafety: whatever the replies, restarts and decisions, the cutover never
// publishes g+1 before every source shard is fenced and CUTOVER took effect, never
// resumes an instance before its generation is published and the shards it routes to
// are unfenced, never lets writes reach both layouts, never moves a generation back,
// never writes files for an unpublished generation, and always ends once the world is
// reliable, in a state that matches its outcome.
func TestPropertySafety(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		res := run(rapidChooser{t}, cfg)
		if len(res.violations) > 0 {
			t.Fatalf("config %+v\nviolations:\n  %s\nlog:\n  %s", cfg, strings.Join(res.violations, "\n  "), strings.Join(res.log, "\n  "))
		}
	})
}

// TestPropertyOutcomes: without foreign writers to the record, a cutover never halts or
// aborts, and a reliable world reaches the outcome that was asked for unless a failure
// rolled it back first.
func TestPropertyOutcomes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := drawConfig(t)
		cfg.foreign = false
		res := run(rapidChooser{t}, cfg)
		if len(res.violations) > 0 || res.done == nil {
			t.Fatalf("config %+v\nviolations:\n  %s\nlog:\n  %s", cfg, strings.Join(res.violations, "\n  "), strings.Join(res.log, "\n  "))
		}
		switch res.done.Outcome {
		case cutover.Finalized, cutover.RolledBack, cutover.Reversed:
		default:
			t.Fatalf("outcome %v (%s) without foreign writers\n%s", res.done.Outcome, res.done.Reason, strings.Join(res.log, "\n"))
		}
		if cfg.chaos == 0 {
			want := map[int]cutover.Outcome{0: cutover.Finalized, 1: cutover.Reversed, 2: cutover.Finalized}[cfg.finalize]
			require.Equal(t, want, res.done.Outcome, "a reliable world must reach the decision: %s", res.done.Reason)
		}
	})
}

// TestMutantsTripInvariants: every mutant of the protocol is caught by the invariant
// named for it, within a bounded number of seeds (most on the first reliable run; the
// ones with a bound need the chaos to meet their fault: a CUTOVER that swaps and then
// fails, or one that lands after its failure was answered, a pause that fails for good in
// a reverse, a late answer to an earlier attempt while the retry is in flight, which a run
// meets in one to ten percent of seeds).
func TestMutantsTripInvariants(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutant    cutover.Mutants
		invariant string
		seeds     uint64 // default 20
		chaos     int    // default 40
	}{
		{"SkipFence", cutover.Mutants{SkipFence: true}, "is not fenced", 0, 0},
		{"SkipFence/split", cutover.Mutants{SkipFence: true}, "split brain", 0, 0},
		{"PublishBeforeCutover", cutover.Mutants{PublishBeforeCutover: true}, "published before CUTOVER took effect", 0, 0},
		{"ResumeBeforePublish", cutover.Mutants{ResumeBeforePublish: true}, "is not published (CUTOVER took effect)", 0, 0},
		// (check.Resume reports the first thing wrong with a RESUME; its fenced-shard half
		// is tripped by RetryReusesStep, in TestRetryHasItsOwnStep.)
		{"PublishBeforeCutover/reverse", cutover.Mutants{PublishBeforeCutover: true}, "before the reverse CUTOVER took effect", 0, 0},
		{"FilesBeforePublish", cutover.Mutants{FilesBeforePublish: true}, "files for generation 5 written while the store has 4", 0, 0},
		{"ReverseReusesGeneration", cutover.Mutants{ReverseReusesGeneration: true}, "generation goes back from 5 to 4", 0, 0},
		{"ReverseReusesGeneration/store", cutover.Mutants{ReverseReusesGeneration: true}, "record refused by the store", 0, 0},
		{"SkipFence/lost", cutover.Mutants{SkipFence: true}, "acknowledged writes lost", 200, 200},
		{"UnfencedDestination", cutover.Mutants{UnfencedDestination: true}, "which no stored generation routes to", 0, 0},
		{"UnfencedDestination/lost", cutover.Mutants{UnfencedDestination: true}, "acknowledged writes lost", 200, 200},
		{"OpenDestinationOnRollback", cutover.Mutants{OpenDestinationOnRollback: true}, "a rollback leaves the destination fenced", 200, 200},
		{"OpenDestinationOnRollback/late", cutover.Mutants{OpenDestinationOnRollback: true}, "which no stored generation routes to", 1000, 200},
		{"MissedForwardOnly", cutover.Mutants{MissedForwardOnly: true}, "but Done.Missed is", 500, 200},
		{"RetryReusesStep/fence", cutover.Mutants{RetryReusesStep: true}, "is in flight on shard", 500, 200},
		{"RetryReusesStep/hold", cutover.Mutants{RetryReusesStep: true}, "is in flight on instance", 200, 200},
		{"RetryReusesStep/alert", cutover.Mutants{RetryReusesStep: true}, check.InvRetryAlert, 200, 200},
		// With the check on, d is reloaded as soon as the resume ends; finalize's reload
		// covers a check that could not run, which SkipCheck stands in for.
		{"SkipFinalReload", cutover.Mutants{SkipFinalReload: true, SkipCheck: true}, "writes reach the src layout", 2000, 200},
		{"SkipCheck", cutover.Mutants{SkipCheck: true}, "serving ended with the designated instance", 2000, 200},
		{"ReverseKeepsDesignated", cutover.Mutants{ReverseKeepsDesignated: true}, "reversed but the designated instance", 200, 200},
		{"SilentLostCopy", cutover.Mutants{SilentLostCopy: true}, "no Alert says so", 2000, 200},
		{"UnresumedOnRetry", cutover.Mutants{UnresumedOnRetry: true}, "in Unresumed, but each of the", 200, 200},
		{"SkipDrain", cutover.Mutants{SkipDrain: true}, "sent without draining shard", 0, 0},
		{"SkipDrain/lost", cutover.Mutants{SkipDrain: true}, "acknowledged writes lost", 0, 0},
		{"SkipReverseDrain", cutover.Mutants{SkipReverseDrain: true}, "sent without draining shard n0 of the dst layout", 0, 0},
		{"SkipReverseDrain/lost", cutover.Mutants{SkipReverseDrain: true}, "acknowledged writes lost: taken on the dst layout", 0, 0},
		{"ReverseOpensAtOnce", cutover.Mutants{ReverseOpensAtOnce: true}, "with the shard index the dst layout gave it", 0, 0},
		// Run where another database's copy starts on d right after this one's (its world).
		{"AdoptAnyTask", cutover.Mutants{AdoptAnyTask: true}, "cuts over another database's task", 500, 200},
		// Run where another database's copy starts on d at the forward CUTOVER (its world).
		{"StreamOfAnyDatabase", cutover.Mutants{StreamOfAnyDatabase: true}, "another database's", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds, chaos := cmp.Or(tc.seeds, 20), cmp.Or(tc.chaos, 40)
			for seed := range seeds {
				cfg := runConfig{instances: 3, attempts: 2, chaos: chaos, mutants: tc.mutant, finalize: int(seed % 2)}
				cfg.otherDB, cfg.otherEarly = tc.mutant.AdoptAnyTask, tc.mutant.AdoptAnyTask
				cfg.otherLate = tc.mutant.StreamOfAnyDatabase
				res := run(rngChooser{rand.New(rand.NewPCG(seed, 1))}, cfg)
				for _, v := range res.violations {
					if strings.Contains(v, tc.invariant) {
						t.Logf("%s tripped %q at seed %d of %d: %s", tc.name, tc.invariant, seed, seeds, v)
						return
					}
				}
			}
			t.Fatalf("mutant %s never tripped %q in %d seeds", tc.name, tc.invariant, seeds)
		})
	}
	t.Run("SettleUnderCheckoutTimeout", func(t *testing.T) {
		// The old layout opens while the queries d's RELOAD retried there still wait.
		for seed := range uint64(20) {
			res := run(rngChooser{rand.New(rand.NewPCG(seed, 1))}, runConfig{instances: 3, attempts: 2, chaos: 40, finalize: 1, settle: 500})
			for _, v := range res.violations {
				if strings.Contains(v, "when shard s0 opened") || strings.Contains(v, "when shard s1 opened") {
					t.Logf("tripped at seed %d: %s", seed, v)
					return
				}
			}
		}
		t.Fatal("a ReverseSettle under checkout_timeout never tripped the retried query landing")
	})
	t.Run("none", func(t *testing.T) {
		for seed := range uint64(20) {
			res := run(rngChooser{rand.New(rand.NewPCG(seed, 1))}, runConfig{instances: 3, attempts: 2, chaos: 40})
			require.Empty(t, res.violations, "seed %d", seed)
		}
	})
}
