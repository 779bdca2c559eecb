package render

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInput is matched (errors.Is) by every problem with the renderer's own inputs:
// credentials, options, or a record for the wrong router. A record that fails
// shardmap's Validate is refused with that validation error instead (errors.Is
// shardmap.ErrInvalid), wrapped.
var ErrInput = errors.New("render: invalid input")

// InputError is one problem with an input, with the path of the field it is about, such
// as "credentials.users[1].password" or "options.branches[0].name". A Reason never quotes
// a secret: problems with a password say what is wrong with it, not what it is.
type InputError struct {
	Field  string
	Reason string
}

func (e *InputError) Error() string { return "render: " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInput }

// InputErrors lists every problem found in one call; errors.As finds each *InputError.
type InputErrors struct {
	Problems []*InputError
}

func (e *InputErrors) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "render: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Field + ": " + p.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInput) true.
func (e *InputErrors) Is(target error) bool { return target == ErrInput }

// Unwrap exposes each problem to errors.As.
func (e *InputErrors) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

type problems struct{ list []*InputError }

func (p *problems) add(field, format string, a ...any) {
	p.list = append(p.list, &InputError{Field: field, Reason: fmt.Sprintf(format, a...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &InputErrors{Problems: p.list}
}

// text checks a string that is not secret and goes into a file: non-empty, valid UTF-8
// (TOML and JSON hold only Unicode text) and no NUL (neither Postgres nor MySQL accept one
// in a name or a path). The value is quoted in the message; invalid UTF-8 is shown escaped.
func (p *problems) text(field, s string) bool {
	switch {
	case s == "":
		p.add(field, "is empty")
	case !utf8.ValidString(s):
		p.add(field, "%q is not valid UTF-8", s)
	case strings.IndexByte(s, 0) >= 0:
		p.add(field, "%q contains a NUL byte", s)
	default:
		return true
	}
	return false
}

// secret checks a password the same way as text, without ever quoting it.
func (p *problems) secret(field string, s Secret) bool {
	switch {
	case s == "":
		p.add(field, "is empty; give a password")
	case !utf8.ValidString(string(s)):
		p.add(field, "is not valid UTF-8 (the files hold only Unicode text); the value is not shown")
	case strings.IndexByte(string(s), 0) >= 0:
		p.add(field, "contains a NUL byte, which no server accepts in a password; the value is not shown")
	default:
		return true
	}
	return false
}
