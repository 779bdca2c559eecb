package detsim_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim"
)

func TestScheduleRoundTrip(t *testing.T) {
	names := make([]string, len(detsim.Catalogue))
	for i, p := range detsim.Catalogue {
		names[i] = p.Name
	}
	rapid.Check(t, func(t *rapid.T) {
		sc := &detsim.Schedule{}
		if rapid.Bool().Draw(t, "ops set") {
			sc.Ops = []int{}
			at := 0
			for range rapid.IntRange(0, 10).Draw(t, "nops") {
				at += rapid.IntRange(1, 50).Draw(t, "gap")
				sc.Ops = append(sc.Ops, at-1)
			}
		}
		if rapid.Bool().Draw(t, "faults set") {
			sc.Faults = []detsim.Firing{}
			for range rapid.IntRange(0, 10).Draw(t, "nfaults") {
				sc.Faults = append(sc.Faults, detsim.Firing{Point: rapid.SampledFrom(names).Draw(t, "p"), N: rapid.IntRange(1, 1000).Draw(t, "n")})
			}
		}
		got, err := detsim.ParseSchedule(sc.String())
		require.NoError(t, err)
		require.Equal(t, sc.String(), got.String())
		require.Equal(t, sc.Ops, got.Ops)
		require.Equal(t, sc.Faults, got.Faults)
	})
}

func TestParseScheduleRejects(t *testing.T) {
	for _, bad := range []string{"ops", "ops=1;ops=2", "ops=2,1", "ops=-1", "faults=x#1", "faults=net.drop", "faults=net.drop#0", "zap=1", "ops=a"} {
		_, err := detsim.ParseSchedule(bad)
		require.ErrorIs(t, err, detsim.ErrBadSchedule, "%q", bad)
	}
	sc, err := detsim.ParseSchedule("")
	require.NoError(t, err)
	require.Nil(t, sc.Ops)
	require.Nil(t, sc.Faults)
	sc, err = detsim.ParseSchedule("ops=;faults=")
	require.NoError(t, err)
	require.NotNil(t, sc.Ops)
	require.Empty(t, sc.Ops)
}

// FuzzParseSchedule: any input is refused with ErrBadSchedule or parses to a schedule whose
// text form parses back to the same schedule.
func FuzzParseSchedule(f *testing.F) {
	f.Add("ops=0,3,7;faults=net.drop#12,pgdog.crash#2")
	f.Add("ops=*;faults=")
	f.Add("faults=backend.restart#1")
	f.Fuzz(func(t *testing.T, text string) {
		sc, err := detsim.ParseSchedule(text)
		if err != nil {
			require.ErrorIs(t, err, detsim.ErrBadSchedule)
			return
		}
		again, err := detsim.ParseSchedule(sc.String())
		require.NoError(t, err)
		require.Equal(t, sc.String(), again.String())
	})
}
