package machine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// The canonical trace line is one JSON object with the keys in a fixed order: "spec",
// "action", the event's fields in the order they were declared, then "t":
//
//	{"spec":"ShardMap","action":"Reload","instance":"pgdog-1","gen":4,"ok":true,"t":1234}
//
// Strings are escaped as encoding/json escapes them, integers are decimal, booleans are
// true/false, and there is no whitespace. The same event always gives the same bytes, which
// is what lets detsim hash a run and the TLA+ trace checker read it.

// ErrBadTrace is wrapped by every error about an event that cannot be encoded or a line
// that is not a canonical trace line.
var ErrBadTrace = errors.New("machine: bad trace event")

var reserved = map[string]bool{"spec": true, "action": true, "t": true}

// AppendJSON appends the canonical JSON encoding of e to dst (without a newline).
func AppendJSON(dst []byte, e SpecEvent) ([]byte, error) {
	if e.Spec == "" || e.Action == "" {
		return dst, fmt.Errorf("%w: spec and action must be set (got spec=%q action=%q)", ErrBadTrace, e.Spec, e.Action)
	}
	dst = append(dst, `{"spec":`...)
	dst, err := appendString(dst, e.Spec, "spec")
	if err != nil {
		return dst, err
	}
	dst = append(dst, `,"action":`...)
	if dst, err = appendString(dst, e.Action, "action"); err != nil {
		return dst, err
	}
	for i, f := range e.Fields {
		if f.Key == "" || reserved[f.Key] {
			return dst, fmt.Errorf("%w: %s %s: fields[%d] has key %q (keys must be non-empty and not spec, action or t)", ErrBadTrace, e.Spec, e.Action, i, f.Key)
		}
		for _, g := range e.Fields[:i] {
			if g.Key == f.Key {
				return dst, fmt.Errorf("%w: %s %s: field %q appears twice", ErrBadTrace, e.Spec, e.Action, f.Key)
			}
		}
		dst = append(dst, ',')
		if dst, err = appendString(dst, f.Key, "field key"); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		switch f.Value.kind {
		case KindString:
			if dst, err = appendString(dst, f.Value.s, "field "+f.Key); err != nil {
				return dst, err
			}
		case KindInt:
			dst = strconv.AppendInt(dst, f.Value.i, 10)
		case KindBool:
			dst = strconv.AppendBool(dst, f.Value.i != 0)
		default:
			return dst, fmt.Errorf("%w: %s %s: field %q has no value (build fields with machine.S, I, U or B)", ErrBadTrace, e.Spec, e.Action, f.Key)
		}
	}
	dst = append(dst, `,"t":`...)
	dst = strconv.AppendInt(dst, e.T, 10)
	return append(dst, '}'), nil
}

func appendString(dst []byte, s, what string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, fmt.Errorf("%w: %s %q is not valid UTF-8", ErrBadTrace, what, s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return dst, fmt.Errorf("%w: %s: %v", ErrBadTrace, what, err)
	}
	return append(dst, b...), nil
}

// Encoder writes events as canonical JSON lines.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w. It does not buffer: wrap w in a bufio.Writer
// (and flush it) when writing many events.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode writes one line. An event that cannot be encoded writes nothing.
func (enc *Encoder) Encode(e SpecEvent) error {
	b, err := AppendJSON(enc.buf[:0], e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	enc.buf = b
	_, err = enc.w.Write(b)
	return err
}

// ParseLine decodes one canonical trace line (with or without its trailing newline).
// It rejects anything the encoder would not have produced: keys out of order, floats,
// nulls, arrays, objects, duplicate keys or trailing data.
func ParseLine(line []byte) (SpecEvent, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var e SpecEvent
	bad := func(format string, a ...any) (SpecEvent, error) {
		return SpecEvent{}, fmt.Errorf("%w: %s", ErrBadTrace, fmt.Sprintf(format, a...))
	}
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return bad("a trace line must be one JSON object")
	}
	seen := map[string]bool{}
	pos := 0
	sawT := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return bad("%v", err)
		}
		key := kt.(string) // object keys are always strings
		if seen[key] {
			return bad("key %q appears twice", key)
		}
		seen[key] = true
		if sawT {
			return bad(`key %q after "t" ("t" must be last)`, key)
		}
		vt, err := dec.Token()
		if err != nil {
			return bad("value of %q: %v", key, err)
		}
		switch {
		case pos == 0 && key != "spec", pos == 1 && key != "action":
			return bad(`key %d is %q; a trace line starts with "spec" then "action"`, pos, key)
		case key == "spec" || key == "action":
			s, ok := vt.(string)
			if !ok || s == "" {
				return bad("%q must be a non-empty string", key)
			}
			if key == "spec" {
				e.Spec = s
			} else {
				e.Action = s
			}
		case key == "t":
			n, ok := vt.(json.Number)
			if !ok {
				return bad(`"t" must be an integer`)
			}
			if e.T, err = strconv.ParseInt(string(n), 10, 64); err != nil {
				return bad(`"t" must be an integer: %v`, err)
			}
			sawT = true
		default:
			switch v := vt.(type) {
			case string:
				e.Fields = append(e.Fields, S(key, v))
			case bool:
				e.Fields = append(e.Fields, B(key, v))
			case json.Number:
				i, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return bad("field %q must be an int64: %v", key, err)
				}
				e.Fields = append(e.Fields, I(key, i))
			default:
				return bad("field %q must be a string, an integer or a boolean", key)
			}
		}
		pos++
	}
	if _, err := dec.Token(); err != nil {
		return bad("%v", err)
	}
	if !sawT || e.Spec == "" || e.Action == "" {
		return bad(`a trace line needs "spec", "action" and "t"`)
	}
	if dec.More() {
		return bad("trailing data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("trailing data after the object")
	}
	return e, nil
}

// Decoder reads canonical JSON lines back into events.
type Decoder struct {
	sc   *bufio.Scanner
	line int
}

// NewDecoder returns a Decoder reading from r. Lines may be up to 1 MiB long.
func NewDecoder(r io.Reader) *Decoder {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &Decoder{sc: sc}
}

// Next returns the next event, or io.EOF after the last one. Blank lines are skipped. An
// error names the line number.
func (d *Decoder) Next() (SpecEvent, error) {
	for d.sc.Scan() {
		d.line++
		b := bytes.TrimSpace(d.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		e, err := ParseLine(b)
		if err != nil {
			return SpecEvent{}, fmt.Errorf("line %d: %w", d.line, err)
		}
		return e, nil
	}
	if err := d.sc.Err(); err != nil {
		return SpecEvent{}, fmt.Errorf("line %d: %w", d.line+1, err)
	}
	return SpecEvent{}, io.EOF
}
