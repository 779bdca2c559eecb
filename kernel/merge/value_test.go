package merge

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestParseDecimal(t *testing.T) {
	for _, c := range []struct {
		in, out string
		kind    Kind
		scale   int32
	}{
		{"1.50", "1.50", KindDec, 2},
		{"-12.340", "-12.340", KindDec, 3},
		{"7", "7", KindInt, 0},
		{"-0", "0", KindInt, 0},
		{"-0.00", "0.00", KindDec, 2},
		{"007", "7", KindInt, 0},
		{"+5", "5", KindInt, 0},
		{"3.", "3", KindInt, 0},
		{".5", "0.5", KindDec, 1},
		{"0.000001", "0.000001", KindDec, 6},
		{"9223372036854775807", "9223372036854775807", KindInt, 0},
		{"-9223372036854775808", "-9223372036854775808", KindInt, 0},
		{"9223372036854775808", "9223372036854775808", KindDec, 0},
		{"-123456789012345678901234567890", "-123456789012345678901234567890", KindDec, 0},
		{"100.00", "100.00", KindDec, 2},
	} {
		v, err := ParseDecimal(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, c.out, v.String(), c.in)
		require.Equal(t, c.kind, v.Kind(), c.in)
		require.Equal(t, c.scale, v.Scale(), c.in)
	}
	for in, msg := range map[string]string{
		"":                                      "is not a number",
		"-":                                     "is not a number",
		".":                                     "is not a number",
		"1e3":                                   "has an exponent",
		"1.5E2":                                 "has an exponent",
		"abc":                                   `unexpected 'a'`,
		"1.2.3":                                 `unexpected '.'`,
		"--1":                                   `unexpected '-'`,
		"1 ":                                    `unexpected ' '`,
		"NaN":                                   `unexpected 'N'`,
		"0." + strings.Repeat("1", MaxScale+1):  "digits after the point",
		strings.Repeat("9", MaxIntDigits+1):     "digits before the point",
		"-" + strings.Repeat("9", MaxIntDigits): "",
	} {
		_, err := ParseDecimal(in)
		if msg == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, msg, "%.20q", in)
		require.ErrorIs(t, err, ErrBadInput)
	}
}

func TestDecimal(t *testing.T) {
	v, err := Decimal(big.NewInt(150), 2)
	require.NoError(t, err)
	require.Equal(t, "1.50", v.String())
	w, err := Decimal(big.NewInt(15), 1)
	require.NoError(t, err)
	require.Zero(t, Compare(v, w), "1.50 = 1.5")
	require.NotEqual(t, v, w, "== is identity: the display scales differ")
	x, err := Decimal(big.NewInt(-42), 0)
	require.NoError(t, err)
	require.Equal(t, Int(-42), x, "an integer that fits int64 takes the int form")
	_, err = Decimal(big.NewInt(1), -1)
	require.ErrorContains(t, err, "scale -1 is outside 0..16383")
	_, err = Decimal(big.NewInt(1), MaxScale+1)
	require.Error(t, err)
	require.Equal(t, "1", BigInt(big.NewInt(1)).String())
	require.Equal(t, `"a\"b\\c\n\u0001é"`, Text("a\"b\\c\n\x01é").String())
	require.Equal(t, "null true false", Null().String()+" "+Bool(true).String()+" "+Bool(false).String())
}

func genNumber(t *rapid.T, label string) Value {
	switch rapid.IntRange(0, 3).Draw(t, label+"/form") {
	case 0:
		return Int(rapid.Int64().Draw(t, label))
	case 1:
		return Int(rapid.Int64Range(-20, 20).Draw(t, label))
	case 2:
		return genDec(t, label)
	}
	coef, _ := new(big.Int).SetString(rapid.StringMatching(`-?[0-9]{1,40}`).Draw(t, label+"/digits"), 10)
	v, err := Decimal(coef, int32(rapid.IntRange(0, 30).Draw(t, label+"/scale")))
	if err != nil {
		panic(err)
	}
	return v
}

// TestCompareNumbersMatchesRat: the allocation-free comparison of ints and decimals agrees with
// exact rational arithmetic, and appendKey (the GROUP BY key) is equal exactly when Compare is 0.
func TestCompareNumbersMatchesRat(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genNumber(t, "a"), genNumber(t, "b")
		if rapid.Bool().Draw(t, "same") {
			b = a // equal values are otherwise rare
		}
		want := naiveRat(a).Cmp(naiveRat(b))
		require.Equal(t, want, Compare(a, b), "%v vs %v", a, b)
		require.Equal(t, -want, Compare(b, a), "%v vs %v", b, a)
		require.Equal(t, want == 0, string(appendKey(nil, a)) == string(appendKey(nil, b)), "keys of %v and %v", a, b)
	})
}

// TestDecimalRoundTrips: AsDecimal then Decimal gives back the identical value, and the printed
// form parses back to it.
func TestDecimalRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := genNumber(t, "v")
		coef, scale, ok := v.AsDecimal()
		require.True(t, ok)
		w, err := Decimal(coef, scale)
		require.NoError(t, err)
		require.Equal(t, v, w)
		p, err := ParseDecimal(v.String())
		require.NoError(t, err)
		require.Equal(t, v, p)
	})
}

func TestCompareAcrossClasses(t *testing.T) {
	order := []Value{Bool(false), Bool(true), Int(math.MinInt64), Int(0), Text(""), Text("A"), Text("a"), Text("é"), Null()}
	for i, a := range order {
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			require.Equal(t, want, Compare(a, b), "%v vs %v", a, b)
		}
	}
}

func TestValueAccessors(t *testing.T) {
	n, ok := Int(5).AsInt64()
	require.True(t, ok)
	require.Equal(t, int64(5), n)
	_, ok = Text("5").AsInt64()
	require.False(t, ok)
	b, ok := Bool(true).AsBool()
	require.True(t, ok && b)
	s, ok := Text("x").AsText()
	require.True(t, ok)
	require.Equal(t, "x", s)
	_, _, ok = Text("x").AsDecimal()
	require.False(t, ok)
	require.True(t, Null().IsNull())
	require.True(t, Int(1).IsNumber())
	require.Equal(t, "decimal", KindDec.String())
	require.Equal(t, "Kind(9)", Kind(9).String())
}
