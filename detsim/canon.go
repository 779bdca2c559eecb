package detsim

import (
	"encoding/json"
	"strconv"
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
