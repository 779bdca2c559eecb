package lsn

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrSyntax is wrapped by every error about text that is not a pg_lsn.
var ErrSyntax = errors.New("lsn: invalid pg_lsn syntax")

// LSN is a position in the write-ahead log: Postgres' pg_lsn, a 64-bit byte offset. Positions
// compare numerically (a < b), never as text: "9/0" sorts after "10/0" as a string.
type LSN uint64

// Invalid is Postgres' InvalidXLogRecPtr; no real WAL record starts or ends there.
const Invalid LSN = 0

// maxComponent is the most hexadecimal digits Postgres accepts in either half
// (MAXPG_LSNCOMPONENT in src/backend/utils/adt/pg_lsn.c).
const maxComponent = 8

// Parse reads the text form Postgres prints and accepts: two halves of 1 to 8 hexadecimal
// digits (either case, leading zeros allowed) separated by "/", nothing else (no sign, no
// spaces). The value is high<<32 | low. It accepts exactly what the server's pg_lsn input
// accepts, so a position read from any Postgres client round-trips.
func Parse(s string) (LSN, error) {
	slash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			slash = i
			break
		}
	}
	if slash < 1 || slash > maxComponent || len(s)-slash-1 < 1 || len(s)-slash-1 > maxComponent {
		return 0, syntaxError(s)
	}
	hi, ok := parseHex(s[:slash])
	if !ok {
		return 0, syntaxError(s)
	}
	lo, ok := parseHex(s[slash+1:])
	if !ok {
		return 0, syntaxError(s)
	}
	return LSN(hi<<32 | lo), nil
}

func parseHex(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

func syntaxError(s string) error {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return fmt.Errorf("%w: %q is not a WAL position (want two hexadecimal halves of 1 to 8 digits separated by \"/\", like 16/B374D848)", ErrSyntax, s)
}

// MustParse is Parse for constants in tests and examples; it panics on bad input.
func MustParse(s string) LSN {
	l, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

// String formats l as Postgres does (%X/%X): upper-case hexadecimal halves without padding.
func (l LSN) String() string {
	return string(l.AppendText(nil))
}

// AppendText appends the text form of l to b.
func (l LSN) AppendText(b []byte) []byte {
	hi, lo := uint64(l)>>32, uint64(l)&0xFFFFFFFF
	b = appendUpperHex(b, hi)
	b = append(b, '/')
	return appendUpperHex(b, lo)
}

func appendUpperHex(b []byte, v uint64) []byte {
	start := len(b)
	b = strconv.AppendUint(b, v, 16)
	for i := start; i < len(b); i++ {
		if 'a' <= b[i] && b[i] <= 'f' {
			b[i] -= 'a' - 'A'
		}
	}
	return b
}

// MarshalText implements encoding.TextMarshaler with the Postgres text form.
func (l LSN) MarshalText() ([]byte, error) { return l.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler with Parse.
func (l *LSN) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Compare returns -1, 0 or +1 as a is before, at or after b in the WAL.
func Compare(a, b LSN) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
