package machine

import (
	"fmt"
	"strconv"
)

// SpecEvent is one transition of a machine, named after the action of the TLA+ spec it
// implements, so a recorded trace can be replayed against the spec. Fields are kept in the
// order the emitter declared them; that order is part of the canonical encoding.
type SpecEvent struct {
	Spec   string
	Action string
	Fields []Field
	T      int64 // Ctx.Now when the event was emitted, in milliseconds
}

// Field is one named value of a SpecEvent.
type Field struct {
	Key   string
	Value Value
}

// Kind says which of a Value's representations is in use.
type Kind uint8

// The kinds a field may hold: the spec side reads traces with the TLA+ Json module, which
// knows strings, integers and booleans, so traces carry nothing else.
const (
	KindString Kind = iota + 1
	KindInt
	KindBool
)

// Value is a string, an integer or a boolean. The zero Value is invalid and is rejected by
// the encoder, which catches an emitter that forgot to set a field.
type Value struct {
	kind Kind
	s    string
	i    int64
}

// Kind reports the representation in use (0 for the zero Value).
func (v Value) Kind() Kind { return v.kind }

// Str returns the string of a KindString value and "" otherwise.
func (v Value) Str() string { return v.s }

// Int returns the integer of a KindInt value and 0 otherwise.
func (v Value) Int() int64 { return v.i }

// Bool returns the boolean of a KindBool value and false otherwise.
func (v Value) Bool() bool { return v.kind == KindBool && v.i != 0 }

// String formats the value as it appears in a trace line.
func (v Value) String() string {
	switch v.kind {
	case KindString:
		return strconv.Quote(v.s)
	case KindInt:
		return strconv.FormatInt(v.i, 10)
	case KindBool:
		return strconv.FormatBool(v.Bool())
	}
	return "<invalid>"
}

// S makes a string field.
func S(key, v string) Field { return Field{key, Value{kind: KindString, s: v}} }

// I makes an integer field.
func I(key string, v int64) Field { return Field{key, Value{kind: KindInt, i: v}} }

// U makes an integer field from an unsigned value such as a generation or a version.
// Values above math.MaxInt64 cannot be carried by the trace format; they never arise for
// generations and versions, which count writes, and they are encoded as the largest int64
// so a trace never wraps to a negative number.
func U(key string, v uint64) Field {
	if v > 1<<63-1 {
		v = 1<<63 - 1
	}
	return I(key, int64(v))
}

// B makes a boolean field.
func B(key string, v bool) Field {
	var i int64
	if v {
		i = 1
	}
	return Field{key, Value{kind: KindBool, i: i}}
}

// Get returns the value of the first field named key.
func (e SpecEvent) Get(key string) (Value, bool) {
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return Value{}, false
}

// String renders the event compactly for test output: `Spec Action k=v k=v`.
func (e SpecEvent) String() string {
	b := []byte(e.Spec + " " + e.Action)
	for _, f := range e.Fields {
		b = append(b, ' ')
		b = append(b, f.Key...)
		b = append(b, '=')
		if f.Value.kind == KindString {
			b = append(b, f.Value.s...)
		} else {
			b = append(b, f.Value.String()...)
		}
	}
	return string(b)
}

// TraceSink receives SpecEvents. Implementations must not block for long: machines emit
// from inside On. A driver's sink typically buffers and writes JSON lines (see Encoder).
type TraceSink interface {
	Emit(SpecEvent)
}

// Recorder is a TraceSink that keeps every event in memory, for tests and the simulator.
type Recorder struct {
	Events []SpecEvent
}

// Emit appends e.
func (r *Recorder) Emit(e SpecEvent) { r.Events = append(r.Events, e) }

// Take returns the events recorded since the last Take and forgets them.
func (r *Recorder) Take() []SpecEvent {
	ev := r.Events
	r.Events = nil
	return ev
}

// Discard is a TraceSink that drops every event.
var Discard TraceSink = discard{}

type discard struct{}

func (discard) Emit(SpecEvent) {}

func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}
