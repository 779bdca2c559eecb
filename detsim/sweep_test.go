package detsim_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim"
)

// TestSweepAgreesWithSerialRuns: a parallel sweep finds exactly the failing seeds that
// running each seed alone finds, reports the lowest as First, counts every run and step,
// and calls OnRun once per seed.
func TestSweepAgreesWithSerialRuns(t *testing.T) {
	seeds := detsim.SeedRange(1, 120)
	require.Equal(t, uint64(120), seeds[len(seeds)-1])
	o := detsim.RunOptions{Mutant: "ack-early"}
	var want []uint64
	steps := 0
	for _, s := range seeds {
		r := toy.Run(s, o)
		steps += r.Steps
		if r.Violation != nil {
			want = append(want, s)
		}
	}
	require.NotEmpty(t, want, "the mutant must trip within 120 seeds for this test to mean anything")
	var calls atomic.Int64
	res := toy.Sweep(context.Background(), seeds, detsim.SweepOptions{Workers: 4, Run: o, OnRun: func(detsim.Result) { calls.Add(1) }})
	require.Equal(t, want, res.FailedSeeds)
	require.Equal(t, 120, res.Runs)
	require.Equal(t, int64(120), calls.Load())
	require.Equal(t, steps, res.Steps)
	require.NotNil(t, res.First)
	require.Equal(t, want[0], res.First.Seed)
	require.Equal(t, toy.Run(want[0], o).Hash, res.First.Hash)
	total := 0
	for _, n := range res.Invariants {
		total += n
	}
	require.Equal(t, len(want), total)

	correct := toy.Sweep(context.Background(), seeds, detsim.SweepOptions{Workers: 3})
	require.Empty(t, correct.FailedSeeds)
	require.Nil(t, correct.First)
}

// TestSweepStopsWithItsContext: a cancelled sweep starts no more seeds.
func TestSweepStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int64
	res := toy.Sweep(ctx, detsim.SeedRange(1, 10_000), detsim.SweepOptions{Workers: 2, OnRun: func(detsim.Result) {
		if calls.Add(1) == 10 {
			cancel()
		}
	}})
	require.Less(t, res.Runs, 10_000)
	require.GreaterOrEqual(t, res.Runs, 10)
	require.Equal(t, int64(res.Runs), calls.Load())
}
