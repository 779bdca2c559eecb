package failover_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
)

type chooser interface{ pick(n int) int }

type rapidChooser struct{ t *rapid.T }

func (c rapidChooser) pick(n int) int { return rapid.IntRange(0, n-1).Draw(c.t, "choice") }

type rngChooser struct{ r *rand.Rand }

func (c rngChooser) pick(n int) int { return c.r.IntN(n) }

// run drives one failover: a hostile phase (failures that took effect or not, duplicated
// and late answers, restarts, timers, harmless concurrent writes to the record), then a
// reliable one in which it must end.
func run(c chooser, vitess bool, chaos int, mu failover.Mutants) (*failover.Done, []string, []string) {
	done, _, v, log := runWith(c, vitess, chaos, mu, nil)
	return done, v, log
}

// runWith is run with setup applied to the world before the failover starts; it also
// returns the world.
func runWith(c chooser, vitess bool, chaos int, mu failover.Mutants, setup func(*world)) (*failover.Done, *world, []string, []string) {
	rec, shard, promoted := pgFixture()
	if vitess {
		rec, shard, promoted = vtFixture()
	}
	return runShape(c, rec, shard, promoted, chaos, mu, setup)
}

// runShape is runWith on a given record, shard and promoted primary.
func runShape(c chooser, rec *shardmap.Record, shard string, promoted shardmap.Backend, chaos int, mu failover.Mutants, setup func(*world)) (*failover.Done, *world, []string, []string) {
	opts := failover.Options{RetryAfter: 100, Attempts: 1 + c.pick(3), Mutants: mu}
	w := newWorld(rec, shard, promoted, opts.Attempts)
	if setup != nil {
		setup(w)
	}
	m := failover.New()
	rng := rand.New(rand.NewPCG(5, 6))
	now := int64(1000)
	var pending []failover.Command
	var answered []failover.Input
	var done *failover.Done
	var log []string
	timers := map[string]int64{}
	feed := func(in failover.Input) {
		for _, cmd := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: machine.Discard}, in) {
			log = append(log, cmd.String())
			if v := describes(cmd); v != "" {
				w.violate("%s", v)
			}
			w.checkStep(cmd)
			switch cmd := cmd.(type) {
			case failover.SetTimer:
				timers[cmd.ID] = cmd.At
			case failover.Done:
				done = &cmd
				w.checkEnd(cmd)
			case failover.Alert:
				w.alerts = append(w.alerts, cmd)
			default:
				pending = append(pending, cmd)
			}
		}
		if o, ended := m.Done(); ended != (done != nil) || ended && o != done.Outcome {
			w.violate("Done() says (%v, %v) after the commands %v", o, ended, done)
		}
	}
	feed(failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app", Options: opts})
	for i := 0; done == nil && i < chaos; i++ {
		switch k := c.pick(10); {
		case k < 5 && len(pending) > 0:
			j := c.pick(len(pending))
			cmd := pending[j]
			pending = slices.Delete(pending, j, j+1)
			var in failover.Input
			switch c.pick(4) {
			case 0:
				in = w.apply(cmd, errors.New("unreachable"), c.pick(2) == 1)
			case 1:
				if _, ok := cmd.(failover.WriteRecord); ok {
					w.foreignBump() // a concurrent, unrelated write
				}
				in = w.apply(cmd, nil, false)
			default:
				in = w.apply(cmd, nil, false)
			}
			answered = append(answered, in)
			feed(in)
		case k < 6 && len(answered) > 0:
			feed(answered[c.pick(len(answered))])
		case k < 8:
			now += int64(c.pick(300))
			for id, at := range timers {
				if at <= now {
					delete(timers, id)
					feed(failover.TimerFired{ID: id})
					break
				}
			}
		default:
			for _, cmd := range pending {
				if c.pick(2) == 1 {
					w.apply(cmd, nil, false)
				}
			}
			pending, answered, timers = nil, nil, map[string]int64{}
			b, _ := json.Marshal(m.Snapshot())
			var s failover.Snapshot
			if err := json.Unmarshal(b, &s); err != nil {
				panic(err)
			}
			var err error
			if m, err = failover.Restore(s); err != nil {
				panic(err)
			}
			feed(failover.Restarted{})
		}
	}
	for i := 0; done == nil && i < 1000; i++ {
		if len(pending) > 0 {
			cmd := pending[0]
			pending = pending[1:]
			feed(w.apply(cmd, nil, false))
			continue
		}
		for id, at := range timers {
			delete(timers, id)
			now = max(now, at)
			feed(failover.TimerFired{ID: id})
			break
		}
	}
	v := w.violations
	if done == nil {
		v = append(v, "no Done once the world was reliable")
	}
	return done, w, v, log
}

// TestPropertyFailover: whatever the answers and restarts, generations only increase,
// every record written is valid, the record names the promoted primary only after the old
// one was fenced (or tried Attempts times) and, for Vitess, after the tablet was
// reparented; ConfigPush only ever gets a stored generation that names it; and the
// failover ends Repointed once the world is reliable.
func TestPropertyFailover(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vitess := rapid.Bool().Draw(t, "vitess")
		chaos := rapid.IntRange(0, 80).Draw(t, "chaos")
		done, v, log := run(rapidChooser{t}, vitess, chaos, failover.Mutants{})
		if len(v) > 0 || done.Outcome != failover.Repointed {
			t.Fatalf("violations %v, done %v\n%s", v, done, strings.Join(log, "\n"))
		}
	})
}

// TestMutantsTripInvariants: each mutant is caught by the invariant named for it within
// 20 seeds.
func TestMutantsTripInvariants(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutant    failover.Mutants
		vitess    bool
		invariant string
		setup     func(*world)
	}{
		{"SkipFence/pgdog", failover.Mutants{SkipFence: true}, false, "before the old primary was fenced", nil},
		{"SkipFence/vitess", failover.Mutants{SkipFence: true}, true, "before the old primary was fenced", nil},
		{"RecordBeforeReparent", failover.Mutants{RecordBeforeReparent: true}, true, "before Vitess reparented the tablet", nil},
		{"PushBeforeRecord", failover.Mutants{PushBeforeRecord: true}, false, "which no stored record naming the promoted primary has", nil},
		{"KeepGeneration", failover.Mutants{KeepGeneration: true}, false, "generations only increase", nil},
		{"KeepGeneration/store", failover.Mutants{KeepGeneration: true}, true, "record refused by the store", nil},
		{"ClaimFenced", failover.Mutants{ClaimFenced: true}, false, check.InvFailoverDone, func(w *world) { w.oldDown = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			for seed := range uint64(20) {
				_, _, v, _ := runWith(rngChooser{rand.New(rand.NewPCG(seed, 3))}, tc.vitess, 20, tc.mutant, tc.setup)
				for _, x := range v {
					if strings.Contains(x, tc.invariant) {
						caught++
						break
					}
				}
			}
			require.Positive(t, caught, "mutant %s never tripped %q in 20 seeds", tc.name, tc.invariant)
		})
	}
}

// TestOldPrimaryDown: with the old primary down every fence fails, and the correct machine
// still repoints, says it did not fence (Done.Fenced false) and alerts so (the world's
// check.FailoverDone holds): the world in which MutantClaimFenced is caught.
func TestOldPrimaryDown(t *testing.T) {
	for seed := range uint64(20) {
		done, w, v, log := runWith(rngChooser{rand.New(rand.NewPCG(seed, 3))}, false, 20, failover.Mutants{}, func(w *world) { w.oldDown = true })
		require.Empty(t, v, strings.Join(log, "\n"))
		require.NotNil(t, done)
		require.Equal(t, failover.Repointed, done.Outcome, done.Reason)
		require.False(t, done.Fenced)
		require.True(t, w.alerted("could not be fenced"))
	}
}
