package detsim

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"loam.dev/router/machine"
)

// appendLabel appends the canonical trace line of a scheduled event: byte for byte what
// machine.AppendJSON writes for SpecEvent{Spec: "sim", Action: l.Kind, Fields: from, to,
// what (when not empty), id (when not zero), T: t}. It is written out by hand because it runs
// once per event and must not allocate; TestLabelMatchesMachineEncoding holds it to the
// machine package's encoder.
func appendLabel(dst []byte, l Label, t int64) []byte {
	dst = append(dst, `{"spec":"sim","action":`...)
	dst = appendJSONString(dst, l.Kind)
	if l.From != "" {
		dst = append(dst, `,"from":`...)
		dst = appendJSONString(dst, l.From)
	}
	if l.To != "" {
		dst = append(dst, `,"to":`...)
		dst = appendJSONString(dst, l.To)
	}
	if l.What != "" {
		dst = append(dst, `,"what":`...)
		dst = appendJSONString(dst, l.What)
	}
	if l.ID != 0 {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendInt(dst, l.ID, 10)
	}
	dst = append(dst, `,"t":`...)
	dst = strconv.AppendInt(dst, t, 10)
	return append(dst, '}')
}

// appendJSONString quotes s as encoding/json does: printable ASCII other than the quote,
// the backslash and the HTML characters is copied; anything else goes through json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendSpecEvent appends e's canonical line, byte for byte what machine.AppendJSON writes
// (TestSpecEventMatchesMachineEncoding), without its per-string json.Marshal for the common
// case; an event it does not vouch for (an empty or reserved or repeated key, a value
// without a kind, invalid UTF-8) goes to machine.AppendJSON, which says what is wrong.
func appendSpecEvent(dst []byte, e machine.SpecEvent) ([]byte, error) {
	if e.Spec == "" || e.Action == "" || !utf8.ValidString(e.Spec) || !utf8.ValidString(e.Action) {
		return machine.AppendJSON(dst, e)
	}
	for i, f := range e.Fields {
		if f.Key == "" || f.Key == "spec" || f.Key == "action" || f.Key == "t" || !utf8.ValidString(f.Key) {
			return machine.AppendJSON(dst, e)
		}
		for _, g := range e.Fields[:i] {
			if g.Key == f.Key {
				return machine.AppendJSON(dst, e)
			}
		}
		switch f.Value.Kind() {
		case machine.KindString:
			if !utf8.ValidString(f.Value.Str()) {
				return machine.AppendJSON(dst, e)
			}
		case machine.KindInt, machine.KindBool:
		default:
			return machine.AppendJSON(dst, e)
		}
	}
	dst = append(dst, `{"spec":`...)
	dst = appendJSONString(dst, e.Spec)
	dst = append(dst, `,"action":`...)
	dst = appendJSONString(dst, e.Action)
	for _, f := range e.Fields {
		dst = append(dst, ',')
		dst = appendJSONString(dst, f.Key)
		dst = append(dst, ':')
		switch f.Value.Kind() {
		case machine.KindString:
			dst = appendJSONString(dst, f.Value.Str())
		case machine.KindInt:
			dst = strconv.AppendInt(dst, f.Value.Int(), 10)
		case machine.KindBool:
			dst = strconv.AppendBool(dst, f.Value.Bool())
		}
	}
	dst = append(dst, `,"t":`...)
	dst = strconv.AppendInt(dst, e.T, 10)
	return append(dst, '}'), nil
}
