package merge

import (
	"math/big"
)

// numSum is an exact running SUM. It stays in int64 until a carry or a decimal needs more, so
// summing integers that fit does not allocate.
type numSum struct {
	seen  bool
	small int64
	big   *big.Int // coefficient at scale, once the int64 form is not enough
	scale int32    // the largest display scale added, which is the scale Postgres gives the sum
}

func (s *numSum) add(v Value) {
	s.seen = true
	if v.kind == KindInt && s.big == nil {
		r := s.small + v.i
		if (v.i >= 0) == (r >= s.small) { // no overflow
			s.small = r
			return
		}
	}
	if s.big == nil {
		s.big = big.NewInt(s.small)
	}
	coef, sc, _ := v.AsDecimal()
	switch {
	case sc > s.scale:
		s.big.Mul(s.big, pow10(int64(sc-s.scale)))
		s.scale = sc
	case sc < s.scale:
		coef.Mul(coef, pow10(int64(s.scale-sc)))
	}
	s.big.Add(s.big, coef)
}

// value returns the sum, or NULL when nothing was added (SQL's SUM of no rows).
func (s *numSum) value() Value {
	switch {
	case !s.seen:
		return Value{}
	case s.big == nil:
		return Int(s.small)
	}
	v, _ := Decimal(s.big, s.scale) // scale is one a value already had
	return v
}

func pow10(n int64) *big.Int { return new(big.Int).Exp(big.NewInt(10), big.NewInt(n), nil) }

// Postgres's numeric constants (src/backend/utils/adt/numeric.c): numerics are stored in base
// NBASE = 10000, DEC_DIGITS = 4 decimal digits per base digit, and a division aims for at
// least NUMERIC_MIN_SIG_DIGITS significant digits.
const (
	pgDecDigits       = 4
	pgMinSigDigits    = 16
	pgMaxDisplayScale = 1000
)

// nbaseLead returns the weight (the power of 10000) and the value of the leading nonzero
// base-10000 digit of a number, the two facts Postgres's select_div_scale reads; (0, 0) for
// zero. Base-10000 digits are aligned on the decimal point.
func nbaseLead(v Value) (weight int64, first int) {
	var buf [20]byte
	var exp int64
	var digits string
	switch v.kind {
	case KindInt:
		sign, e, d := intSci(v.i, &buf)
		if sign == 0 {
			return 0, 0
		}
		exp, digits = e, string(d)
	case KindDec:
		if v.s == "" {
			return 0, 0
		}
		exp, digits = v.i, v.s
	default:
		return 0, 0
	}
	// |v| = 0.digits × 10^exp, so floor(log10|v|) = exp-1 and the weight is its floor over 4.
	weight = floorDiv(exp-1, pgDecDigits)
	t := int(exp - pgDecDigits*weight) // 1..4 leading decimal digits form the base digit
	for j := range t {
		first *= 10
		if j < len(digits) {
			first += int(digits[j] - '0')
		}
	}
	return weight, first
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// avgOf divides an exact sum by a positive count exactly as Postgres computes AVG for integer
// and numeric inputs: numeric_div(sum, count), whose result scale select_div_scale picks so the
// quotient has at least 16 significant digits and no fewer decimals than the sum shows (capped
// at 1000), rounded half away from zero. That is why AVG(1, 2) is 1.5000000000000000 and
// AVG(0.00001, 0.00002, 0.00004) is 0.000023333333333333333333.
func avgOf(sum Value, count int64) Value {
	w1, f1 := nbaseLead(sum)
	w2, f2 := nbaseLead(Int(count))
	q := w1 - w2
	if f1 <= f2 { // first digits equal: Postgres assumes the dividend is the smaller
		q--
	}
	rscale := max(pgMinSigDigits-q*pgDecDigits, int64(sum.scale), 0)
	rscale = min(rscale, pgMaxDisplayScale)
	num, sc, _ := sum.AsDecimal()
	den := big.NewInt(count)
	if d := rscale - int64(sc); d > 0 {
		num.Mul(num, pow10(d))
	} else if d < 0 {
		den.Mul(den, pow10(-d))
	}
	quo, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	if rem.Sign() != 0 && rem.Abs(rem).Lsh(rem, 1).Cmp(den) >= 0 { // |rem| ≥ den/2: away from zero
		if num.Sign() < 0 {
			quo.Sub(quo, big.NewInt(1))
		} else {
			quo.Add(quo, big.NewInt(1))
		}
	}
	v, _ := Decimal(quo, int32(rscale))
	return v
}
