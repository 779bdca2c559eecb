package detsim_test

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim"
	"loam.dev/router/machine"
)

// TestLabelMatchesMachineEncoding holds the simulator's allocation-free label encoder to the
// machine package's canonical encoder, byte for byte.
func TestLabelMatchesMachineEncoding(t *testing.T) {
	str := rapid.OneOf(rapid.StringMatching(`[a-z0-9._-]{0,12}`), rapid.String().Filter(utf8.ValidString))
	rapid.Check(t, func(t *rapid.T) {
		l := detsim.Label{
			Kind: rapid.StringMatching(`[a-z-]{1,10}`).Draw(t, "kind"),
			From: str.Draw(t, "from"), To: str.Draw(t, "to"), What: str.Draw(t, "what"),
			ID: rapid.Int64().Draw(t, "id"),
		}
		at := rapid.Int64().Draw(t, "t")
		e := machine.SpecEvent{Spec: "sim", Action: l.Kind, T: at}
		for _, f := range []machine.Field{machine.S("from", l.From), machine.S("to", l.To), machine.S("what", l.What)} {
			if f.Value.Str() != "" {
				e.Fields = append(e.Fields, f)
			}
		}
		if l.ID != 0 {
			e.Fields = append(e.Fields, machine.I("id", l.ID))
		}
		want, err := machine.AppendJSON(nil, e)
		require.NoError(t, err)
		require.Equal(t, string(want), string(detsim.AppendLabel(nil, l, at)))
	})
}

func TestDdminFindsTheNeededSubset(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "n")
		items := make([]int, n)
		for i := range items {
			items[i] = i
		}
		needed := map[int]bool{}
		if n > 0 {
			for _, k := range rapid.SliceOfN(rapid.IntRange(0, n-1), 0, 4).Draw(t, "needed") {
				needed[k] = true
			}
		}
		calls := 0
		got := detsim.Ddmin(items, func(sub []int) bool {
			calls++
			have := map[int]bool{}
			for _, x := range sub {
				have[x] = true
			}
			for k := range needed {
				if !have[k] {
					return false
				}
			}
			return true
		})
		require.Len(t, got, len(needed))
		for _, x := range got {
			require.True(t, needed[x])
		}
		require.LessOrEqual(t, calls, 1+4*len(needed)*(1+bitsLen(n))*4+2*n, "ddmin took %d tests", calls)
	})
}

func bitsLen(n int) int {
	k := 0
	for n > 0 {
		k++
		n >>= 1
	}
	return k
}

// TestSpecEventMatchesMachineEncoding holds the simulator's spec-event encoder to the
// machine package's, byte for byte and error for error, on any event.
func TestSpecEventMatchesMachineEncoding(t *testing.T) {
	str := rapid.OneOf(rapid.StringMatching(`[a-z0-9._-]{0,12}`), rapid.String(), rapid.SampledFrom([]string{"", "spec", "action", "t", "\xff"}))
	rapid.Check(t, func(t *rapid.T) {
		e := machine.SpecEvent{Spec: str.Draw(t, "spec"), Action: str.Draw(t, "action"), T: rapid.Int64().Draw(t, "t")}
		for range rapid.IntRange(0, 5).Draw(t, "n") {
			k := str.Draw(t, "key")
			switch rapid.IntRange(0, 3).Draw(t, "kind") {
			case 0:
				e.Fields = append(e.Fields, machine.S(k, str.Draw(t, "s")))
			case 1:
				e.Fields = append(e.Fields, machine.I(k, rapid.Int64().Draw(t, "i")))
			case 2:
				e.Fields = append(e.Fields, machine.B(k, rapid.Bool().Draw(t, "b")))
			default:
				e.Fields = append(e.Fields, machine.Field{Key: k})
			}
		}
		want, werr := machine.AppendJSON(nil, e)
		got, gerr := detsim.AppendSpecEvent(nil, e)
		require.Equal(t, werr == nil, gerr == nil, "errors differ: %v vs %v", werr, gerr)
		if werr == nil {
			require.Equal(t, string(want), string(got))
		}
	})
}
