package failover_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/machine/failover"
)

// TestPropertyPermanentRefusal: a promoted tablet that serves another shard is refused for
// good by vtctld (ErrWrongShard). Whatever the answers and restarts before the refusal
// arrives, the failover ends Failed with a reason naming the shard and what to do, the
// record is never repointed, Vitess reparents nothing, and the Reparent is sent at most
// once per restart or lost answer, never again once refused: it is not retried forever.
func TestPropertyPermanentRefusal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		chaos := rapid.IntRange(0, 60).Draw(t, "chaos")
		done, w, v, log := runWith(rapidChooser{t}, true, chaos, failover.Mutants{}, func(w *world) { w.wrongShard = true })
		if len(v) > 0 || done.Outcome != failover.Failed {
			t.Fatalf("violations %v, done %v\n%s", v, done, strings.Join(log, "\n"))
		}
		require.Contains(t, done.Reason, "refused for good")
		require.Contains(t, done.Reason, "naming a tablet of commerce/80-")
		require.False(t, w.reparented, "nothing reparented")
		require.Equal(t, w.start.Version, w.store.Version, "the record is unchanged")
		// Sends of the Reparent that got an answer the machine acted on: at most one, the
		// refusal that ended it.
		require.Equal(t, 1, strings.Count(strings.Join(log, "\n"), "Done outcome=failed"), "one Done:\n%s", strings.Join(log, "\n"))
	})
}

// TestMutantRetryPermanent: a machine that retries a permanent refusal (the bug this
// fixes) never ends, which the run reports, within 20 seeds.
func TestMutantRetryPermanent(t *testing.T) {
	caught := 0
	for seed := range uint64(20) {
		done, w, v, _ := runWith(rngChooser{rand.New(rand.NewPCG(seed, 3))}, true, 20, failover.Mutants{RetryPermanent: true}, func(w *world) { w.wrongShard = true })
		if done == nil && w.refusals > 5 && strings.Contains(strings.Join(v, ";"), "no Done once the world was reliable") {
			caught++
		}
	}
	require.Positive(t, caught, "RetryPermanent never retried past the refusal in 20 seeds")
}
