package lsn_test

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/lsn"
)

// Accepted and rejected inputs of Postgres' pg_lsn input function, from the server's own
// regression test (src/test/regress/sql/pg_lsn.sql) and the reference notes on 15.18.
func TestParseVectors(t *testing.T) {
	ok := map[string]string{
		"0/0":               "0/0",
		"FFFFFFFF/FFFFFFFF": "FFFFFFFF/FFFFFFFF",
		"0/18BE4F0":         "0/18BE4F0",
		"0/3000000":         "0/3000000",
		"0/00000001":        "0/1",
		"16/B374D848":       "16/B374D848",
		"16/b374d848":       "16/B374D848",
		"00000016/0":        "16/0",
	}
	for in, want := range ok {
		l, err := lsn.Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, l.String(), in)
	}
	require.Equal(t, lsn.LSN(0x16_B374D848), lsn.MustParse("16/B374D848"))
	for _, in := range []string{
		"", "zz", "G/0", "-1/0", " 0/12345678", "0/12345678 ", "ABCD/", "/ABCD", "/",
		"123456789/0", "0/123456789", "0/0/0", "0x1/0", "+1/0", "0//1", "1/-0", "１/0",
	} {
		_, err := lsn.Parse(in)
		require.ErrorIs(t, err, lsn.ErrSyntax, "%q must be rejected", in)
		require.ErrorContains(t, err, "like 16/B374D848")
	}
}

func TestFormatMatchesPostgres(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Uint64().Draw(t, "v")
		l := lsn.LSN(v)
		require.Equal(t, fmt.Sprintf("%X/%X", v>>32, v&0xFFFFFFFF), l.String())
		back, err := lsn.Parse(l.String())
		require.NoError(t, err)
		require.Equal(t, l, back)
		b, _ := l.MarshalText()
		var u lsn.LSN
		require.NoError(t, u.UnmarshalText(b))
		require.Equal(t, l, u)
	})
}

func TestCompareIsNumeric(t *testing.T) {
	a, b := lsn.MustParse("9/0"), lsn.MustParse("10/0")
	require.Equal(t, -1, lsn.Compare(a, b), "9/0 is before 10/0 although it sorts after as text")
	require.Equal(t, 1, lsn.Compare(b, a))
	require.Equal(t, 0, lsn.Compare(a, a))
	require.ErrorIs(t, new(lsn.LSN).UnmarshalText([]byte("x")), lsn.ErrSyntax)
}

// naiveParse is an independent reading of the pg_lsn grammar, for the fuzz differential.
var naiveGrammar = regexp.MustCompile(`^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$`)

func naiveParse(s string) (uint64, bool) {
	m := naiveGrammar.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	hi, _ := strconv.ParseUint(m[1], 16, 64)
	lo, _ := strconv.ParseUint(m[2], 16, 64)
	return hi<<32 | lo, true
}

// FuzzParse: Parse agrees with the independent grammar on every input, fails only with
// ErrSyntax, and what it accepts formats to the canonical form that parses back.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF", "0/00000001", "zz", " 0/1", "123456789/0", "0/0/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := lsn.Parse(s)
		want, ok := naiveParse(s)
		if ok != (err == nil) {
			t.Fatalf("Parse(%q) err=%v, grammar says ok=%v", s, err, ok)
		}
		if err != nil {
			if !errors.Is(err, lsn.ErrSyntax) {
				t.Fatalf("error does not wrap ErrSyntax: %v", err)
			}
			return
		}
		if uint64(got) != want {
			t.Fatalf("Parse(%q) = %#x, want %#x", s, uint64(got), want)
		}
		back, err := lsn.Parse(got.String())
		if err != nil || back != got || strings.ContainsAny(got.String(), "abcdef") {
			t.Fatalf("canonical form %q of %q does not round-trip (%v)", got.String(), s, err)
		}
	})
}

func TestEndpointString(t *testing.T) {
	require.Equal(t, "127.0.0.1:5432", lsn.Endpoint{Host: "127.0.0.1", Port: 5432}.String())
	require.Equal(t, "[::1]:5433", lsn.Endpoint{Host: "::1", Port: 5433}.String())
	a, b := lsn.Endpoint{Host: "a", Port: 2}, lsn.Endpoint{Host: "a", Port: 10}
	require.Equal(t, -1, a.Compare(b))
	require.Equal(t, 1, lsn.Endpoint{Host: "b", Port: 1}.Compare(b))
}
