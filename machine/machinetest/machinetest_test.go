package machinetest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
