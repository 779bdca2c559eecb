package keyrange_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/keyrange"
)

func TestParseFormat(t *testing.T) {
	for _, name := range []string{"-", "-80", "80-", "40-80", "0080-0100", "-0000000000000001", "0"} {
		r, err := keyrange.Parse(name)
		require.NoError(t, err, name)
		require.Equal(t, name, r.String())
	}
	r, err := keyrange.Parse("40-8A")
	require.NoError(t, err)
	require.Equal(t, "40-8a", r.String(), "formats lower-case like Vitess")
}

func TestParseErrorsNameTheText(t *testing.T) {
	for name, why := range map[string]string{
		"":                      "want START-END",
		"80":                    "want START-END",
		"8-":                    "odd number",
		"-8g":                   "not hex",
		"80-40":                 "not below",
		"80-80":                 "not below",
		"80-8000":               "not below", // equal values, written differently
		"-40-80":                "more than one",
		"-000000000000000000ff": "longer than 8 bytes",
	} {
		_, err := keyrange.Parse(name)
		var pe *keyrange.ParseError
		require.ErrorAs(t, err, &pe, "input %q", name)
		require.Equal(t, name, pe.Input)
		require.Contains(t, err.Error(), why, "input %q", name)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", name))
	}
}

func ksid(hexs string) uint64 {
	var b [8]byte
	copy(b[:], mustHex(hexs))
	return binary.BigEndian.Uint64(b[:])
}

func mustHex(s string) []byte {
	var out []byte
	for i := 0; i < len(s); i += 2 {
		var v byte
		fmt.Sscanf(s[i:i+2], "%02x", &v)
		out = append(out, v)
	}
	return out
}

// The containment facts checked on Vitess (reference/vitess.md §4).
func TestContainsVitessFacts(t *testing.T) {
	r := keyrange.MustParse("40-80")
	require.True(t, r.Contains(ksid("40")))
	require.True(t, r.Contains(ksid("7fffffffffffffff")))
	require.False(t, r.Contains(ksid("3fffffffffffffff")))
	require.False(t, r.Contains(ksid("80")))
	require.True(t, keyrange.MustParse("80-").Contains(ksid("800000")))
	require.True(t, keyrange.MustParse("80-").Contains(^uint64(0)))
	require.True(t, keyrange.MustParse("-80").Contains(0))
	require.True(t, keyrange.MustParse("80-").Equal(keyrange.MustParse("8000-")))
	require.False(t, keyrange.MustParse("80-").Equal(keyrange.MustParse("-80")))
}

func names(rs []keyrange.Range) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, " ")
}

// Even splits as Vitess's GenerateShardRanges names them (reference/vitess.md §4).
func TestSplitNamesLikeVitess(t *testing.T) {
	for n, want := range map[int]string{
		1: "-", 2: "-80 80-", 3: "-55 55-aa aa-", 4: "-40 40-80 80-c0 c0-",
	} {
		got, err := keyrange.Split(keyrange.Full(), n)
		require.NoError(t, err)
		require.Equal(t, want, names(got), "n=%d", n)
	}
	got, err := keyrange.Split(keyrange.Full(), 512)
	require.NoError(t, err)
	require.Equal(t, "-0080", got[0].String())
	require.Equal(t, "0080-0100", got[1].String())
	require.Equal(t, "ff80-", got[511].String())
	got, err = keyrange.Split(keyrange.MustParse("40-80"), 2)
	require.NoError(t, err)
	require.Equal(t, "40-60 60-80", names(got))
	_, err = keyrange.Split(keyrange.MustParse("-0000000000000002"), 3)
	require.ErrorContains(t, err, "cannot be split")
}

func TestParseSpec(t *testing.T) {
	rs, err := keyrange.ParseSpec("-40-80-c0-")
	require.NoError(t, err)
	require.Equal(t, "-40 40-80 80-c0 c0-", names(rs))
	require.NoError(t, keyrange.CheckPartition(rs))
	_, err = keyrange.ParseSpec("40-80")
	require.Error(t, err)
	_, err = keyrange.ParseSpec("-80-40-")
	require.ErrorContains(t, err, "not below")
}

func TestCheckPartitionNamesTheRange(t *testing.T) {
	for spec, want := range map[string]string{
		"-40 40-80 80-":   "",
		"-":               "",
		"40-80 80-":       "ranges[0]: \"40-80\" does not start at the beginning",
		"-40 50-80 80-":   "ranges[1]: gap between ranges[0] \"-40\" and \"50-80\"",
		"-50 40-80 80-":   "ranges[1]: \"40-80\" overlaps ranges[0] \"-50\"",
		"-40 40-80 20-30": "ranges[2]: \"20-30\" is out of order",
		"-40 40-80":       "ranges[1]: \"40-80\" does not run to the end",
		"- 80-":           "ranges[1]: \"80-\" comes after \"-\"",
		"-40 40-80 80-c":  "odd",
	} {
		var rs []keyrange.Range
		var perr error
		for _, n := range strings.Fields(spec) {
			r, err := keyrange.Parse(n)
			if err != nil {
				perr = err
				break
			}
			rs = append(rs, r)
		}
		if perr != nil {
			require.ErrorContains(t, perr, want)
			continue
		}
		err := keyrange.CheckPartition(rs)
		if want == "" {
			require.NoError(t, err, spec)
			continue
		}
		var pe *keyrange.PartitionError
		require.ErrorAs(t, err, &pe, spec)
		require.Contains(t, err.Error(), want, spec)
	}
	require.Error(t, keyrange.CheckPartition(nil))
}

// genPartition draws a random exact partition by splitting ranges repeatedly.
func genPartition(t *rapid.T) []keyrange.Range {
	rs := []keyrange.Range{keyrange.Full()}
	for range rapid.IntRange(0, 12).Draw(t, "splits") {
		i := rapid.IntRange(0, len(rs)-1).Draw(t, "which")
		parts, err := keyrange.Split(rs[i], rapid.IntRange(2, 5).Draw(t, "ways"))
		if err != nil {
			continue
		}
		rs = append(rs[:i], append(parts, rs[i+1:]...)...)
	}
	return rs
}

// Lookup agrees with a linear scan by Contains, and exactly one range contains each ID.
func TestLookupMatchesLinearScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rs := genPartition(t)
		p, err := keyrange.NewPartition(rs)
		require.NoError(t, err)
		for range 50 {
			id := rapid.Uint64().Draw(t, "id")
			if rapid.Bool().Draw(t, "boundary") {
				id = rs[rapid.IntRange(0, len(rs)-1).Draw(t, "r")].Start() + uint64(rapid.IntRange(-1, 1).Draw(t, "d"))
			}
			holders := 0
			for _, r := range rs {
				if r.Contains(id) {
					holders++
				}
			}
			require.Equal(t, 1, holders, "id %x", id)
			require.True(t, rs[p.LookupID(id)].Contains(id), "id %x -> %s", id, rs[p.LookupID(id)])
		}
	})
}

// Split then Merge is the identity, and the parts of a split partition their range.
func TestSplitMergeIdentity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rs := genPartition(t)
		r := rs[rapid.IntRange(0, len(rs)-1).Draw(t, "r")]
		parts, err := keyrange.Split(r, rapid.IntRange(1, 300).Draw(t, "n"))
		if err != nil {
			return
		}
		m, err := keyrange.Merge(parts)
		require.NoError(t, err)
		require.Equal(t, r, m, "merge(split(%s)) = %s", r, m)
		for _, p := range parts {
			back, err := keyrange.Parse(p.String())
			require.NoError(t, err)
			require.Equal(t, p, back, "a split part formats to a name that parses back to it")
		}
	})
}

func TestMergeRefusesNonAdjacent(t *testing.T) {
	_, err := keyrange.Merge([]keyrange.Range{keyrange.MustParse("-40"), keyrange.MustParse("80-")})
	require.ErrorContains(t, err, "only adjacent ranges merge")
	_, err = keyrange.Merge(nil)
	require.Error(t, err)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"-", "-80", "80-", "40-80", "0", "0080-0100", "x", "--", "ff-00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		r, err := keyrange.Parse(name)
		if err != nil {
			var pe *keyrange.ParseError
			if !errors.As(err, &pe) || pe.Input != name {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		back, err := keyrange.Parse(r.String())
		if err != nil || back != r {
			t.Fatalf("%q -> %q does not round-trip: %v", name, r.String(), err)
		}
		if strings.ToLower(name) != r.String() {
			t.Fatalf("%q formats as %q", name, r.String())
		}
	})
}

func BenchmarkLookup1024(b *testing.B) {
	rs, _ := keyrange.Split(keyrange.Full(), 1024)
	p, err := keyrange.NewPartition(rs)
	require.NoError(b, err)
	var ids [256][8]byte
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:], uint64(i)*0x9e3779b97f4a7c15)
	}
	b.ReportAllocs()
	b.ResetTimer()
	sink := 0
	for i := 0; b.Loop(); i++ {
		sink += p.Lookup(ids[i&255])
	}
	_ = sink
}
