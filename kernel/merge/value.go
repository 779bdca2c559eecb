package merge

import (
	"cmp"
	"math/big"
	"strconv"
	"strings"
)

// Kind is the class of a Value.
type Kind uint8

// The kinds. KindInt and KindDec are one class, numbers: they compare by value, and KindInt
// is only the fast form of an integer that fits int64 and shows no decimals.
const (
	KindNull Kind = iota // SQL NULL; the zero Value
	KindBool             // boolean: false < true
	KindInt              // an integer that fits int64, shown without decimals
	KindDec              // any other exact decimal: a fraction, a display scale above 0, or an integer beyond int64
	KindText             // text compared bytewise, as under COLLATE "C"
)

func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindDec:
		return "decimal"
	case KindText:
		return "text"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one SQL value as Postgres would return it: NULL, a boolean, an exact number or
// text. Numbers are exact because the reference must agree with Postgres to the last digit:
// SUM(int8) and AVG return numeric in Postgres, and AVG shows a computed number of decimals.
// There are no floats on purpose (see the package documentation).
//
// Values are comparable with ==, which is identity: same kind, same value and, for decimals,
// same display scale (1.0 and 1.00 are not identical). Compare is SQL's ordering and equality.
type Value struct {
	kind  Kind
	neg   bool   // KindDec: negative
	scale int32  // KindDec: display scale, the number of digits shown after the point
	i     int64  // KindInt, KindBool: the value; KindDec: exponent e with value = ±0.digits × 10^e
	s     string // KindText: the bytes; KindDec: significant digits, no leading or trailing zeros ("" for zero)
}

// Limits of a decimal, Postgres's own for numeric: at most 131072 digits before the point and
// a display scale of at most 16383.
const (
	MaxIntDigits = 131072
	MaxScale     = 16383
)

// Null returns SQL NULL, which is also the zero Value.
func Null() Value { return Value{} }

// Int returns an integer value.
func Int(v int64) Value { return Value{kind: KindInt, i: v} }

// Bool returns a boolean value.
func Bool(v bool) Value {
	if v {
		return Value{kind: KindBool, i: 1}
	}
	return Value{kind: KindBool}
}

// Text returns a text value. Text compares bytewise (COLLATE "C"); for UTF-8 that is code
// point order.
func Text(s string) Value { return Value{kind: KindText, s: s} }

// BigInt returns the integer x, in the int64 form when it fits.
func BigInt(x *big.Int) Value {
	v, _ := Decimal(x, 0)
	return v
}

// Decimal returns the exact number coef × 10^-scale shown with scale decimals, as Postgres
// shows a numeric of that display scale (Decimal(150, 2) is 1.50). An integer with scale 0 that
// fits int64 comes back in the KindInt form.
func Decimal(coef *big.Int, scale int32) (Value, error) {
	if scale < 0 || scale > MaxScale {
		return Value{}, fieldErrorf("", "scale %d is outside 0..%d (Postgres's numeric display scale)", scale, MaxScale)
	}
	if scale == 0 && coef.IsInt64() {
		return Int(coef.Int64()), nil
	}
	abs := coef.Text(10)
	neg := false
	if abs[0] == '-' {
		neg, abs = true, abs[1:]
	}
	return decFromDigits(neg, abs, scale), nil
}

// decFromDigits builds a decimal from the digits of its coefficient at the given display
// scale. It never returns the KindInt form; callers that may hold an int64 check first.
func decFromDigits(neg bool, coef string, scale int32) Value {
	exp := int64(len(coef)) - int64(scale)
	lead := 0
	for lead < len(coef) && coef[lead] == '0' {
		lead++
	}
	digits := strings.TrimRight(coef[lead:], "0")
	if digits == "" {
		return Value{kind: KindDec, scale: scale}
	}
	return Value{kind: KindDec, neg: neg, scale: scale, i: exp - int64(lead), s: digits}
}

// ParseDecimal reads a number written as Postgres writes a numeric: an optional sign, digits,
// and optionally a point followed by digits ("-12.50", "7", ".5", "3."). The digits after the
// point set the display scale. There are no exponents, NaN or infinities: write the digits.
func ParseDecimal(s string) (Value, error) {
	body := s
	neg := false
	if body != "" && (body[0] == '-' || body[0] == '+') {
		neg = body[0] == '-'
		body = body[1:]
	}
	intPart, frac, _ := strings.Cut(body, ".")
	if intPart == "" && frac == "" {
		return Value{}, fieldErrorf("", "%q is not a number (want digits, optionally with a sign and a decimal point)", s)
	}
	for _, part := range []string{intPart, frac} {
		for j := 0; j < len(part); j++ {
			if part[j] < '0' || part[j] > '9' {
				if part[j] == 'e' || part[j] == 'E' {
					return Value{}, fieldErrorf("", "%q has an exponent; write numbers as plain digits so their display scale is exact", s)
				}
				return Value{}, fieldErrorf("", "%q is not a number: unexpected %q (want digits, optionally with a sign and a decimal point)", s, part[j])
			}
		}
	}
	if len(frac) > MaxScale {
		return Value{}, fieldErrorf("", "%.40q... has %d digits after the point; Postgres's numeric allows at most %d", s, len(frac), MaxScale)
	}
	if n := len(strings.TrimLeft(intPart, "0")); n > MaxIntDigits {
		return Value{}, fieldErrorf("", "%.40q... has %d digits before the point; Postgres's numeric allows at most %d", s, n, MaxIntDigits)
	}
	if frac == "" { // an integer: the int64 form when it fits
		digits := strings.TrimLeft(intPart, "0")
		if digits == "" {
			return Int(0), nil
		}
		if len(digits) <= 19 {
			if neg {
				digits = "-" + digits
			}
			if n, err := strconv.ParseInt(digits, 10, 64); err == nil {
				return Int(n), nil
			}
		}
	}
	return decFromDigits(neg, intPart+frac, int32(len(frac))), nil
}

// Kind returns the value's kind.
func (v Value) Kind() Kind { return v.kind }

// IsNull reports whether v is SQL NULL.
func (v Value) IsNull() bool { return v.kind == KindNull }

// IsNumber reports whether v is a number (KindInt or KindDec).
func (v Value) IsNumber() bool { return v.kind == KindInt || v.kind == KindDec }

// AsInt64 returns the integer in the KindInt form.
func (v Value) AsInt64() (int64, bool) { return v.i, v.kind == KindInt }

// AsBool returns the boolean of a KindBool value.
func (v Value) AsBool() (bool, bool) { return v.i != 0, v.kind == KindBool }

// AsText returns the string of a KindText value.
func (v Value) AsText() (string, bool) { return v.s, v.kind == KindText }

// AsDecimal returns a number as coef × 10^-scale at its display scale.
func (v Value) AsDecimal() (coef *big.Int, scale int32, ok bool) {
	switch v.kind {
	case KindInt:
		return big.NewInt(v.i), 0, true
	case KindDec:
		c, _ := new(big.Int).SetString(v.coefDigits(), 10)
		if v.neg {
			c.Neg(c)
		}
		return c, v.scale, true
	}
	return nil, 0, false
}

// Scale returns the display scale of a number (0 for KindInt and for non-numbers).
func (v Value) Scale() int32 { return v.scale }

// coefDigits returns the digits of |coef| at the display scale (at least "0").
func (v Value) coefDigits() string {
	if v.s == "" {
		return "0"
	}
	zeros := v.i - int64(len(v.s)) + int64(v.scale) // ≥ 0 by construction
	return v.s + strings.Repeat("0", int(zeros))
}

// String returns the value as the protocol writes it (null, true, 42, 1.50, "text"), which is
// also unambiguous for people.
func (v Value) String() string { return string(appendValue(nil, v)) }

// appendNumber appends a number as Postgres prints it: a sign, the integer part (at least
// one digit) and exactly scale digits after a point.
func appendNumber(dst []byte, v Value) []byte {
	if v.kind == KindInt {
		return strconv.AppendInt(dst, v.i, 10)
	}
	if v.neg {
		dst = append(dst, '-')
	}
	c := v.coefDigits()
	sc := int(v.scale)
	if sc == 0 {
		return append(dst, c...)
	}
	if len(c) <= sc {
		dst = append(dst, '0', '.')
		for range sc - len(c) {
			dst = append(dst, '0')
		}
		return append(dst, c...)
	}
	dst = append(dst, c[:len(c)-sc]...)
	dst = append(dst, '.')
	return append(dst, c[len(c)-sc:]...)
}

// class ranks kinds for the order across classes, which SQL never needs (a column holds one
// type) but which keeps Compare total: bool < number < text < NULL.
func class(k Kind) int {
	switch k {
	case KindBool:
		return 1
	case KindInt, KindDec:
		return 2
	case KindText:
		return 3
	}
	return 4 // KindNull
}

// Compare orders values as ORDER BY x ASC does in Postgres with COLLATE "C": false < true,
// numbers by exact value (1.0 = 1), text bytewise, and NULL after everything (Postgres's
// NULLS LAST default for ASC). Compare(NULL, NULL) is 0 because GROUP BY and DISTINCT treat
// NULLs as one value. Values of different classes (never in one SQL column) order
// bool < number < text.
func Compare(a, b Value) int {
	switch {
	case a.kind == KindInt && b.kind == KindInt:
		return cmp.Compare(a.i, b.i)
	case a.kind == KindText && b.kind == KindText:
		return strings.Compare(a.s, b.s)
	}
	ca, cb := class(a.kind), class(b.kind)
	if ca != cb {
		return cmp.Compare(ca, cb)
	}
	switch a.kind {
	case KindBool:
		return cmp.Compare(a.i, b.i)
	case KindInt, KindDec:
		return compareNumbers(a, b)
	}
	return 0 // both NULL
}

// compareNumbers compares two numbers without allocating: both are brought to the form
// ±0.d1d2…dn × 10^e (d1 ≠ 0), where a larger exponent means a larger magnitude and equal
// exponents compare digit strings.
func compareNumbers(a, b Value) int {
	var ba, bb [20]byte
	switch {
	case a.kind == KindDec && b.kind == KindDec:
		return compareSci(a.sign(), a.i, a.s, b.sign(), b.i, b.s)
	case a.kind == KindDec:
		sb, eb, db := intSci(b.i, &bb)
		return compareSci(a.sign(), a.i, a.s, sb, eb, db)
	case b.kind == KindDec:
		sa, ea, da := intSci(a.i, &ba)
		return compareSci(sa, ea, da, b.sign(), b.i, b.s)
	}
	return cmp.Compare(a.i, b.i)
}

func (v Value) sign() int {
	switch {
	case v.s == "":
		return 0
	case v.neg:
		return -1
	}
	return 1
}

// intSci writes an int64 in the scientific form of compareNumbers into buf.
func intSci(i int64, buf *[20]byte) (sign int, exp int64, digits []byte) {
	if i == 0 {
		return 0, 0, nil
	}
	u := uint64(i)
	sign = 1
	if i < 0 {
		u, sign = -u, -1 // two's complement: right for MinInt64 too
	}
	d := strconv.AppendUint(buf[:0], u, 10)
	exp = int64(len(d))
	for d[len(d)-1] == '0' {
		d = d[:len(d)-1]
	}
	return sign, exp, d
}

func compareSci[A, B ~string | ~[]byte](sa int, ea int64, da A, sb int, eb int64, db B) int {
	if sa != sb {
		return cmp.Compare(sa, sb)
	}
	if sa == 0 {
		return 0
	}
	c := cmp.Compare(ea, eb)
	if c == 0 {
		n := min(len(da), len(db))
		for j := 0; j < n && c == 0; j++ {
			c = cmp.Compare(da[j], db[j])
		}
		if c == 0 {
			c = cmp.Compare(len(da), len(db))
		}
	}
	return c * sa
}

// appendKey appends an encoding of v under which two values are equal exactly when Compare
// says so (so 1.0 and 1 share a key, as they share a GROUP BY group).
func appendKey(dst []byte, v Value) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, 'N')
	case KindBool:
		return append(dst, 'B', byte('0'+v.i))
	case KindText:
		dst = append(dst, 'T')
		dst = strconv.AppendInt(dst, int64(len(v.s)), 10)
		dst = append(dst, ':')
		return append(dst, v.s...)
	}
	var buf [20]byte
	var sign int
	var exp int64
	var digits []byte
	if v.kind == KindInt {
		sign, exp, digits = intSci(v.i, &buf)
	} else {
		sign, exp = v.sign(), v.i
		digits = append(buf[:0], v.s...)
	}
	dst = append(dst, 'D')
	dst = strconv.AppendInt(dst, int64(sign), 10)
	dst = append(dst, 'e')
	dst = strconv.AppendInt(dst, exp, 10)
	dst = append(dst, ':')
	dst = append(dst, digits...)
	return append(dst, ';')
}
