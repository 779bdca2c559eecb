package machine_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
)

// The tests below were added when make mutate showed that the root package's helpers were
// checked only through the machines' tests and golden scripts: gremlins runs a package's own
// tests, and these mutants lived there.

// TestFieldValues: U carries every value up to MaxInt64 exactly and clamps the rest to it
// (never wrapping to a negative number), B reads back as set and only a boolean field is
// true, Get finds the field named among several, and String renders strings raw and the
// rest by value.
func TestFieldValues(t *testing.T) {
	for v, want := range map[uint64]int64{0: 0, 7: 7, math.MaxInt64: math.MaxInt64, math.MaxInt64 + 1: math.MaxInt64, math.MaxUint64: math.MaxInt64} {
		require.Equal(t, want, machine.U("g", v).Value.Int(), "U(%d)", v)
	}
	require.True(t, machine.B("b", true).Value.Bool())
	require.False(t, machine.B("b", false).Value.Bool())
	require.False(t, machine.I("n", 1).Value.Bool(), "an integer field is not a true boolean")

	e := machine.SpecEvent{Spec: "S", Action: "A", Fields: []machine.Field{machine.S("k", "v w"), machine.I("n", 3), machine.B("b", true)}}
	k, _ := e.Get("k")
	n, _ := e.Get("n")
	b, _ := e.Get("b")
	require.Equal(t, "v w", k.Str())
	require.Equal(t, int64(3), n.Int())
	require.True(t, b.Bool())
	_, ok := e.Get("missing")
	require.False(t, ok)
	require.Equal(t, "S A k=v w n=3 b=true", e.String())
}

// TestResumeResendsOrRearms: a restarted stage sends again what was in flight, else re-arms
// the retry timer that was waiting, else does nothing.
func TestResumeResendsOrRearms(t *testing.T) {
	s := machine.Steps{Spec: "S", Restart: "Restart", Done: "Done"}
	for _, tc := range []struct {
		sent    bool
		retryAt int64
		want    string
	}{{true, 0, "send"}, {true, 9, "send"}, {false, 9, "arm 9"}, {false, 0, ""}} {
		var did []string
		s.Resume(&machine.Ctx{Trace: machine.Discard}, "stage", tc.sent, tc.retryAt,
			func() { did = append(did, "send") }, func(at int64) { did = append(did, fmt.Sprint("arm ", at)) })
		require.Equal(t, tc.want, strings.Join(did, ","), "sent=%v retryAt=%d", tc.sent, tc.retryAt)
	}
}

type checked struct{ ok bool }

func (c checked) Clone() checked { return c }
func (c checked) Check() error {
	if !c.ok {
		return errors.New("bad")
	}
	return nil
}

// TestSnapshotStateChecks: a snapshot gives back its state when Check accepts it, and the
// error, never a state, when Check refuses it.
func TestSnapshotStateChecks(t *testing.T) {
	s, err := machine.Snap(checked{ok: true}).State()
	require.NoError(t, err)
	require.Equal(t, checked{ok: true}, s)
	_, err = machine.Snap(checked{}).State()
	require.Error(t, err)
}

// TestDecoderNamesTheLineTooLong: a line over the decoder's 1 MiB limit is reported with
// its own number.
func TestDecoderNamesTheLineTooLong(t *testing.T) {
	d := machine.NewDecoder(strings.NewReader(`{"spec":"S","action":"A","t":1}` + "\n" + strings.Repeat("x", 1<<20+1) + "\n"))
	_, err := d.Next()
	require.NoError(t, err)
	_, err = d.Next()
	require.ErrorContains(t, err, "line 2:")
}
