package render

import (
	"strings"
	"testing"
	"unicode/utf8"

	burnt "github.com/BurntSushi/toml"
	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestAppendTOMLString(t *testing.T) {
	for in, want := range map[string]string{
		"":             `""`,
		"plain":        `"plain"`,
		`a"b`:          `"a\"b"`,
		`a\b`:          `"a\\b"`,
		"a\nb\rc\td":   `"a\nb\rc\td"`,
		"\b\f":         `"\b\f"`,
		"\x00\x01\x1f": `"\u0000\u0001\u001F"`,
		"\x7f":         `"\u007F"`,
		"ünïcødé ☃ 🦫":  `"ünïcødé ☃ 🦫"`,
		"\u2028\u0085": "\"\u2028\u0085\"", // not TOML control characters: written as they are
		`'''"""`:       `"'''\"\"\""`,
	} {
		require.Equal(t, want, string(appendTOMLString(nil, in)), "%q", in)
	}
}

// roundTripTOML writes s as the value of a key and reads it back with both parsers.
func roundTripTOML(t interface{ Fatalf(string, ...any) }, s string) {
	doc := append(append([]byte("k = "), appendTOMLString(nil, s)...), '\n')
	var a, b struct {
		K string `toml:"k"`
	}
	if err := gotoml.Unmarshal(doc, &a); err != nil {
		t.Fatalf("go-toml cannot read %q (from %q): %v", doc, s, err)
	}
	if _, err := burnt.Decode(string(doc), &b); err != nil {
		t.Fatalf("BurntSushi cannot read %q (from %q): %v", doc, s, err)
	}
	if a.K != s || b.K != s {
		t.Fatalf("%q came back as %q (go-toml) and %q (BurntSushi)", s, a.K, b.K)
	}
}

// TestTOMLStringRoundTrip: any valid UTF-8 string reads back as itself.
func TestTOMLStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.OneOf(
			rapid.String(),
			rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '\n', '\r', '\t', 0, 0x7f, 0x1b, '\'', 'a', 'é', '\u2028'})),
		).Draw(t, "s")
		roundTripTOML(t, s)
	})
}

func FuzzTOMLString(f *testing.F) {
	for _, s := range []string{"", `"`, `\`, "\n", "\x00", "\x7f", "ü", `\u0041`, `"""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // the renderer refuses these before writing
		}
		out := string(appendTOMLString(nil, s))
		if strings.ContainsAny(out[1:len(out)-1], "\n\r\x00\x7f") {
			t.Fatalf("%q left a control character unescaped: %q", s, out)
		}
		roundTripTOML(t, s)
	})
}
