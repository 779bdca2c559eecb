package render

import (
	"strconv"
	"unicode/utf8"
)

// The TOML writer is deliberately small: the renderer emits a fixed set of bare keys and
// [table] / [[array]] headers it names itself, so only values need care. Every string is a
// TOML basic string; the inputs are checked to be valid UTF-8 before they get here.

type tomlWriter struct{ b []byte }

// comment writes "# text"; text is the renderer's own and never contains a newline.
func (w *tomlWriter) comment(text string) {
	w.b = append(w.b, "# "...)
	w.b = append(w.b, text...)
	w.b = append(w.b, '\n')
}

// table starts [name] after a blank line.
func (w *tomlWriter) table(name string) {
	w.b = append(w.b, "\n["...)
	w.b = append(w.b, name...)
	w.b = append(w.b, "]\n"...)
}

// arrayTable starts [[name]] after a blank line.
func (w *tomlWriter) arrayTable(name string) {
	w.b = append(w.b, "\n[["...)
	w.b = append(w.b, name...)
	w.b = append(w.b, "]]\n"...)
}

func (w *tomlWriter) key(k string) {
	w.b = append(w.b, k...)
	w.b = append(w.b, " = "...)
}

func (w *tomlWriter) str(k, v string) {
	w.key(k)
	w.b = appendTOMLString(w.b, v)
	w.b = append(w.b, '\n')
}

func (w *tomlWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
	w.b = append(w.b, '\n')
}

func (w *tomlWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
	w.b = append(w.b, '\n')
}

// appendTOMLString appends s as a TOML basic string. TOML (1.0, "String") lets any Unicode
// character stand for itself except the quotation mark, the backslash and the control
// characters other than tab (U+0000-U+0008, U+000A-U+001F, U+007F); those are escaped, tab
// too for readability. s must be valid UTF-8: callers check, because TOML cannot hold
// arbitrary bytes and a silent U+FFFD would change a name or a password.
func appendTOMLString(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf || c >= 0x20 && c != '"' && c != '\\' && c != 0x7f {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
