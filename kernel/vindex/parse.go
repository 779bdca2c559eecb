package vindex

import (
	"errors"
	"fmt"
	"math"
)

// Errors a caller can branch on with errors.Is.
var (
	// ErrNotUint64 marks a value the `hash` vindex cannot turn into a number: Vitess maps such a
	// value to no keyspace ID. The wrapping error quotes the text and says what is wrong.
	ErrNotUint64 = errors.New("not an unsigned decimal integer")
	// ErrKeyspaceIDLength marks a keyspace ID handed to the reverse map that is not 8 bytes.
	ErrKeyspaceIDLength = errors.New("a hash keyspace id must be 8 bytes")
)

// ParseError is the error ParseUint64 returns; Text is the input and Reason what is wrong
// with it. It unwraps to ErrNotUint64.
type ParseError struct {
	Text   string
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("vindex: %q: %s: %v (the hash vindex maps it to no keyspace id)", e.Text, e.Reason, ErrNotUint64)
}

func (e *ParseError) Unwrap() error { return ErrNotUint64 }

// ParseUint64 turns the text of a SQL value into the number the `hash` vindex hashes, the way
// Vitess v0.24.4 does it for every value it does not hold as a signed integer: optional spaces
// and tabs, one or more decimal digits, optional spaces and tabs, nothing else. So "007" is 7
// and " 42\t" is 42, while "", "-1", "+1", "1.5" and "0x10" fail.
//
// A number past 2^64-1 fails (Vitess's parser once missed some of those wraps; v0.24.4 does
// not, and the differential test in conformance/vitessdiff holds this function to it).
//
// It never allocates when the text parses.
func ParseUint64(text string) (uint64, error) {
	i := 0
	for i < len(text) && isBlank(text[i]) {
		i++
	}
	start := i
	var d uint64
	for ; i < len(text); i++ {
		c := text[i]
		if c < '0' || c > '9' {
			break
		}
		if d > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, &ParseError{Text: text, Reason: "greater than 18446744073709551615"}
		}
		d = d*10 + uint64(c-'0')
	}
	if i == start {
		if len(text) == 0 {
			return 0, &ParseError{Text: text, Reason: "empty"}
		}
		return 0, &ParseError{Text: text, Reason: "no digits"}
	}
	for i < len(text) && isBlank(text[i]) {
		i++
	}
	if i < len(text) {
		return 0, &ParseError{Text: text, Reason: fmt.Sprintf("unexpected %q after the number", text[i:])}
	}
	return d, nil
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
