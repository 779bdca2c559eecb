package machine_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/machine"
)

func TestEncodeCanonicalOrder(t *testing.T) {
	e := machine.SpecEvent{Spec: "ShardMap", Action: "Reload", T: 1234,
		Fields: []machine.Field{machine.S("instance", "pgdog-1"), machine.U("gen", 4), machine.B("ok", true)}}
	b, err := machine.AppendJSON(nil, e)
	require.NoError(t, err)
	require.Equal(t, `{"spec":"ShardMap","action":"Reload","instance":"pgdog-1","gen":4,"ok":true,"t":1234}`, string(b))
}

func TestEncodeRejects(t *testing.T) {
	cases := map[string]machine.SpecEvent{
		"no spec":       {Action: "A"},
		"no action":     {Spec: "S"},
		"reserved key":  {Spec: "S", Action: "A", Fields: []machine.Field{machine.I("t", 1)}},
		"empty key":     {Spec: "S", Action: "A", Fields: []machine.Field{machine.I("", 1)}},
		"duplicate key": {Spec: "S", Action: "A", Fields: []machine.Field{machine.I("g", 1), machine.I("g", 2)}},
		"zero value":    {Spec: "S", Action: "A", Fields: []machine.Field{{Key: "g"}}},
		"bad utf8":      {Spec: "S", Action: "A", Fields: []machine.Field{machine.S("s", "\xff")}},
	}
	for name, e := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			err := machine.NewEncoder(&buf).Encode(e)
			require.ErrorIs(t, err, machine.ErrBadTrace)
			require.Zero(t, buf.Len(), "a rejected event must write nothing")
		})
	}
}

func TestParseLineRejectsNonCanonical(t *testing.T) {
	for _, line := range []string{
		``, `[]`, `{}`, `{"action":"A","spec":"S","t":1}`, `{"spec":"S","action":"A"}`,
		`{"spec":"S","action":"A","t":1.5}`, `{"spec":"S","action":"A","x":null,"t":1}`,
		`{"spec":"S","action":"A","x":[1],"t":1}`, `{"spec":"S","action":"A","x":{},"t":1}`,
		`{"spec":"S","action":"A","t":1,"x":2}`, `{"spec":"S","action":"A","x":1,"x":2,"t":1}`,
		`{"spec":"S","action":"A","t":1}{}`, `{"spec":"S","action":"A","t":1} x`,
		`{"spec":"","action":"A","t":1}`, `{"spec":"S","action":"A","x":99999999999999999999,"t":1}`,
		`{"spec":"S","x":1,"action":"A","t":1}`,
	} {
		_, err := machine.ParseLine([]byte(line))
		require.ErrorIs(t, err, machine.ErrBadTrace, "line %q", line)
	}
}

func TestDecoderNamesLine(t *testing.T) {
	in := `{"spec":"S","action":"A","t":1}` + "\n\n" + `{"spec":"S"}` + "\n"
	d := machine.NewDecoder(strings.NewReader(in))
	_, err := d.Next()
	require.NoError(t, err)
	_, err = d.Next()
	require.ErrorContains(t, err, "line 3")
}

func genEvent() *rapid.Generator[machine.SpecEvent] {
	return rapid.Custom(func(t *rapid.T) machine.SpecEvent {
		e := machine.SpecEvent{
			Spec:   rapid.StringMatching(`[A-Za-z]{1,12}`).Draw(t, "spec"),
			Action: rapid.String().Filter(func(s string) bool { return s != "" }).Draw(t, "action"),
			T:      rapid.Int64().Draw(t, "t"),
		}
		keys := rapid.SliceOfDistinct(rapid.String().Filter(func(s string) bool {
			return s != "" && s != "spec" && s != "action" && s != "t"
		}), func(s string) string { return s }).Draw(t, "keys")
		for i, k := range keys {
			switch rapid.IntRange(0, 2).Draw(t, "kind") {
			case 0:
				e.Fields = append(e.Fields, machine.S(k, rapid.String().Draw(t, "s")))
			case 1:
				e.Fields = append(e.Fields, machine.I(k, rapid.Int64().Draw(t, "i")))
			default:
				e.Fields = append(e.Fields, machine.B(k, i%2 == 0))
			}
		}
		return e
	})
}

// TestTraceRoundTrip: decode(encode(e)) == e, and the encoding is a function of e alone.
func TestTraceRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		events := rapid.SliceOf(genEvent()).Draw(t, "events")
		var a, b bytes.Buffer
		for _, e := range events {
			require.NoError(t, machine.NewEncoder(&a).Encode(e))
			require.NoError(t, machine.NewEncoder(&b).Encode(e))
		}
		require.Equal(t, a.Bytes(), b.Bytes())
		d := machine.NewDecoder(&a)
		for _, want := range events {
			got, err := d.Next()
			require.NoError(t, err)
			if len(want.Fields) == 0 {
				want.Fields = nil
			}
			require.Equal(t, want, got)
		}
		_, err := d.Next()
		require.True(t, errors.Is(err, io.EOF))
	})
}

func TestCtxEmitStampsNow(t *testing.T) {
	rec := &machine.Recorder{}
	ctx := &machine.Ctx{Now: 42, Trace: rec}
	ctx.Emit("Cutover", "Fence", machine.S("shard", "s0"))
	require.Equal(t, []machine.SpecEvent{{Spec: "Cutover", Action: "Fence", T: 42, Fields: []machine.Field{machine.S("shard", "s0")}}}, rec.Take())
	(&machine.Ctx{}).Emit("x", "y") // a nil sink discards
}

// FuzzParseLine: any input either fails with ErrBadTrace or parses to an event whose
// canonical encoding parses back to the same event.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"spec":"ShardMap","action":"Reload","instance":"pgdog-1","gen":4,"ok":true,"t":1234}`))
	f.Add([]byte(`{"spec":"S","action":"A","t":-1}`))
	f.Add([]byte(`{"spec":"S","action":"A","x":"\u00e9\n","t":0}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := machine.ParseLine(line)
		if err != nil {
			if !errors.Is(err, machine.ErrBadTrace) {
				t.Fatalf("error does not wrap ErrBadTrace: %v", err)
			}
			return
		}
		b, err := machine.AppendJSON(nil, e)
		if err != nil {
			t.Fatalf("parsed event does not encode: %v (%v)", err, e)
		}
		e2, err := machine.ParseLine(b)
		if err != nil {
			t.Fatalf("re-encoded line does not parse: %v\n%s", err, b)
		}
		b2, _ := machine.AppendJSON(nil, e2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("encoding not stable:\n%s\n%s", b, b2)
		}
	})
}
