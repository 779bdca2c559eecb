package pghash

import (
	"errors"
	"fmt"
)

// ErrSyntax marks a key text that Postgres's input function for its type would refuse with
// SQLSTATE 22P02 (invalid_text_representation).
var ErrSyntax = errors.New("invalid input syntax")

// SyntaxError is the error of ParseUUID and ParseKey; it unwraps to ErrSyntax.
type SyntaxError struct {
	Type   string // the Postgres type name, e.g. "uuid"
	Text   string // the offending input
	Reason string // what is wrong with it
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("pghash: %v for type %s: %q: %s (Postgres refuses it with SQLSTATE 22P02)",
		ErrSyntax, e.Type, e.Text, e.Reason)
}

func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// ParseUUID reads a uuid in every form Postgres's uuid_in accepts: 32 hex digits of either
// case, optionally with a hyphen after any group of four digits (so the standard
// 8-4-4-4-12 form, no hyphens at all, and other groupings), optionally the whole wrapped in
// braces. Nothing else is allowed, not even surrounding spaces.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	i := 0
	braces := len(s) > 0 && s[0] == '{'
	if braces {
		i++
	}
	for n := range u {
		if i+1 >= len(s) {
			return u, &SyntaxError{Type: "uuid", Text: s, Reason: "fewer than 32 hex digits"}
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return u, &SyntaxError{Type: "uuid", Text: s, Reason: fmt.Sprintf("not a hex digit at byte %d", i)}
		}
		u[n] = hi<<4 | lo
		i += 2
		if n%2 == 1 && n < len(u)-1 && i < len(s) && s[i] == '-' {
			i++
		}
	}
	if braces {
		if i >= len(s) || s[i] != '}' {
			return u, &SyntaxError{Type: "uuid", Text: s, Reason: "no closing brace"}
		}
		i++
	}
	if i != len(s) {
		return u, &SyntaxError{Type: "uuid", Text: s, Reason: fmt.Sprintf("unexpected %q after the uuid", s[i:])}
	}
	return u, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// FormatUUID writes u as uuid_out does: lower case, 8-4-4-4-12.
func FormatUUID(u [16]byte) string {
	const digits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for n, x := range u {
		if n == 4 || n == 6 || n == 8 || n == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = digits[x>>4], digits[x&0xf]
		j += 2
	}
	return string(b[:])
}
