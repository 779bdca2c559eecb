package scenario_test

import (
	"encoding/hex"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/scenario"
	"loam.dev/router/detsim/simtest"
)

// defaultSeeds is how many fresh seeds each scenario runs when SIM_SEEDS is unset (20 with
// -race): the design's 2,000 per scenario, on every core (some real mutants need 2,000 to
// 5,000 seeds to trip, so fewer would let them through CI).
const defaultSeeds = 2000

// TestSim runs, for every scenario: with -seed, that one run (and -mutant, -schedule,
// -simtrace); otherwise every corpus seed twice, requiring the same trace hash and no
// violation, then SIM_SEEDS fresh seeds from SIM_SEED_BASE (random when unset, printed).
func TestSim(t *testing.T) {
	if scenario.MutantBuild {
		t.Skip("skipped: this build bakes a mutant into a machine (run only TestMutants with its tag)")
	}
	corpus, err := simtest.Corpus()
	require.NoError(t, err)
	for _, e := range corpus {
		_, ok := scenario.ByName(e.Scenario)
		require.True(t, ok, "%s names scenario %q, which does not exist", e.File, e.Scenario)
	}
	dflt := defaultSeeds
	if raceEnabled {
		dflt = 20 // the full default runs in the build without -race
	}
	n, err := simtest.SeedsFromEnv(dflt)
	require.NoError(t, err)
	base, err := simtest.BaseSeed()
	require.NoError(t, err)
	scenarios := scenario.All()
	if *simtest.Seed != 0 {
		scenarios = append(scenarios, scenario.KnownIssues()...) // a report of one replays too
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if *simtest.Seed != 0 {
				replay(t, sc)
				return
			}
			runs := 0
			for _, e := range corpus {
				if e.Scenario != sc.Name {
					continue
				}
				o := detsim.RunOptions{}
				if e.Schedule != "" {
					sched, err := detsim.ParseSchedule(e.Schedule)
					require.NoError(t, err, e.File)
					o.Schedule = sched
				}
				a := sc.Run(e.Seed, o)
				b := sc.Run(e.Seed, o)
				require.Equal(t, hex.EncodeToString(a.Hash[:]), hex.EncodeToString(b.Hash[:]),
					"%s: seed %d gave two different trace hashes: the run is not deterministic", e.File, e.Seed)
				if a.Violation != nil {
					simtest.Fail(t, sc, a)
				}
				runs++
			}
			t.Logf("%s: %d corpus seeds passed twice with equal hashes; fresh seeds %d..%d (SIM_SEED_BASE=%d SIM_SEEDS=%d)",
				sc.Name, runs, base, base+uint64(n)-1, base, n)
			st := simtest.Sweep(sc, base, n, 0, detsim.RunOptions{}, n >= 10_000 || os.Getenv("SIM_PROGRESS") != "")
			if st.Failed != nil {
				simtest.Fail(t, sc, *st.Failed)
			}
		})
	}
}

// replay runs one seed as the flags say and prints its report or its hash.
func replay(t *testing.T, sc detsim.Scenario) {
	if *simtest.Mutant != "" && !slices.Contains(sc.Mutants, *simtest.Mutant) {
		t.Skipf("scenario %s has no mutant %q", sc.Name, *simtest.Mutant)
	}
	o := detsim.RunOptions{Mutant: *simtest.Mutant, History: true}
	if *simtest.Schedule != "" {
		sched, err := detsim.ParseSchedule(*simtest.Schedule)
		require.NoError(t, err)
		o.Schedule = sched
	}
	if *simtest.Trace != "" {
		f, err := os.Create(*simtest.Trace)
		require.NoError(t, err)
		defer f.Close()
		o.TraceTo = f
	}
	r := sc.Run(*simtest.Seed, o)
	if r.Violation != nil {
		t.Fatalf("\n%s", detsim.Report(r, nil))
	}
	t.Logf("seed %d: %d steps, no violation, trace hash %s\nOPTIONS\n%s", r.Seed, r.Steps, hex.EncodeToString(r.Hash[:]), r.Options)
}
