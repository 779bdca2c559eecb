package pghash

import (
	"encoding/binary"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// naiveHashBytes is hash_bytes_extended written the plainest way: zero-pad the tail to 12
// bytes in a buffer and add its words, with c's low byte left out. It shares only mix, final
// and start with the real one, so it cross-checks the block loop and the tail switch.
func naiveHashBytes(k []byte, seed uint64) uint64 {
	a, b, c := start(len(k), seed)
	for len(k) >= 12 {
		a += binary.LittleEndian.Uint32(k)
		b += binary.LittleEndian.Uint32(k[4:])
		c += binary.LittleEndian.Uint32(k[8:])
		a, b, c = mix(a, b, c)
		k = k[12:]
	}
	var tail [12]byte
	copy(tail[1+8:], k[min(len(k), 8):]) // bytes 8..10 go one byte up: c's low byte is empty
	copy(tail[:8], k[:min(len(k), 8)])
	a += binary.LittleEndian.Uint32(tail[:])
	b += binary.LittleEndian.Uint32(tail[4:])
	c += binary.LittleEndian.Uint32(tail[8:])
	b, c = final(a, b, c)
	return uint64(b)<<32 | uint64(c)
}

func TestPropHashBytesMatchesNaive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "b")
		seed := rapid.Uint64().Draw(t, "seed")
		if rapid.Bool().Draw(t, "zero seed") {
			seed = 0
		}
		want := naiveHashBytes(b, seed)
		require.Equal(t, want, HashBytesExtended(b, seed))
		require.Equal(t, want, HashTextExtended(string(b), seed))
	})
}

// Integers: hash_bytes_uint32_extended is hash_bytes_extended of the four little-endian
// bytes; int4 and int2 hash like the same int8; the int8 fold
// collides as documented.
func TestPropIntegerHashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seed := rapid.Uint64().Draw(t, "seed")
		v := rapid.Int32().Draw(t, "v")
		var le [4]byte
		binary.LittleEndian.PutUint32(le[:], uint32(v))
		require.Equal(t, HashBytesExtended(le[:], seed), HashInt4Extended(v, seed))
		require.Equal(t, HashInt8Extended(int64(v), seed), HashInt4Extended(v, seed))
		w := rapid.Int16().Draw(t, "w")
		require.Equal(t, HashInt8Extended(int64(w), seed), HashInt2Extended(w, seed))
		require.Equal(t, HashInt8Extended(int64(w), HashPartitionSeed), HashInt2Extended(w, HashPartitionSeed))
		// The fold: for non-negative v, v + 2^32·h and v ^ h hash alike when h < 2^31.
		h := rapid.Uint32Range(0, 1<<31-1).Draw(t, "h")
		u := rapid.Uint32().Draw(t, "u")
		big := int64(h)<<32 | int64(u)
		require.Equal(t, HashInt4Extended(int32(u^h), seed), HashInt8Extended(big, seed))
	})
}

// ShardOf* stays below the shard count, equals the one-column Row's remainder, and equals the
// arithmetic of the reference: (h + 0x49a0f4dd15e5a8e3) mod 2^64 mod n, unsigned.
func TestPropShardOf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(1, 1<<20).Draw(t, "shards")
		if rapid.Bool().Draw(t, "huge") {
			n = rapid.Uint64Range(1, ^uint64(0)).Draw(t, "huge shards")
		}
		v := rapid.Int64().Draw(t, "v")
		s := rapid.String().Draw(t, "s")
		var u [16]byte
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "u"))
		var ri, rt, ru Row
		ri.Int8(v)
		rt.Text(s)
		ru.UUID(u)
		for _, c := range []struct {
			shard uint64
			row   Row
			h     uint64
		}{
			{ShardOfInt8(v, n), ri, HashInt8Extended(v, HashPartitionSeed)},
			{ShardOfText(s, n), rt, HashTextExtended(s, HashPartitionSeed)},
			{ShardOfUUID(u, n), ru, HashUUIDExtended(u, HashPartitionSeed)},
			{ShardOfBytea([]byte(s), n), rt, HashBytesExtended([]byte(s), HashPartitionSeed)},
		} {
			require.Less(t, c.shard, n)
			require.Equal(t, c.row.Remainder(n), c.shard)
			require.Equal(t, (c.h+0x49a0f4dd15e5a8e3)%n, c.shard)
		}
		if v >= -1<<31 && v < 1<<31 {
			require.Equal(t, ShardOfInt8(v, n), ShardOfInt4(int32(v), n))
		}
	})
}

// A multi-column key chains hash_combine64 in key order and skips NULL columns.
func TestPropRowCombine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64().Draw(t, "a")
		s := rapid.String().Draw(t, "s")
		var withNull, without Row
		withNull.Int8(a)
		withNull.Null()
		withNull.Text(s)
		withNull.Null()
		without.Int8(a)
		without.Text(s)
		require.Equal(t, without, withNull)
		ha, hs := HashInt8Extended(a, HashPartitionSeed), HashTextExtended(s, HashPartitionSeed)
		want := HashCombine64(HashCombine64(0, ha), hs)
		require.Equal(t, want, without.Hash())
		x := HashCombine64(0, ha)
		require.Equal(t, x^(hs+0x49a0f4dd15e5a8e3+x<<54+x>>7), without.Hash())
		var allNull Row
		allNull.Null()
		require.Zero(t, allNull.Remainder(rapid.Uint64Range(1, 1000).Draw(t, "m")))
	})
}

func TestBpcharIgnoresTrailingSpaces(t *testing.T) {
	require.Equal(t, HashTextExtended("abc", 7), HashBpcharExtended("abc  ", 7))
	require.NotEqual(t, HashTextExtended("abc  ", 7), HashBpcharExtended("abc  ", 7), "text keeps them")
	require.Equal(t, HashTextExtended(" abc", 7), HashBpcharExtended(" abc", 7), "leading spaces count")
}

// uuidGrammar is uuid_in's grammar as a regular expression: optional braces around 32 hex
// digits, each group of four optionally followed by a hyphen except the last.
var uuidGrammar = regexp.MustCompile(`^(\{(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4}\}|(?:[0-9a-fA-F]{4}-?){7}[0-9a-fA-F]{4})$`)

func checkParseUUID(t require.TestingT, s string) {
	u, err := ParseUUID(s)
	if !uuidGrammar.MatchString(s) {
		require.ErrorIs(t, err, ErrSyntax, "%q", s)
		return
	}
	require.NoError(t, err, "%q", s)
	digits := strings.NewReplacer("-", "", "{", "", "}", "").Replace(s)
	require.Equal(t, strings.ToLower(digits), strings.ReplaceAll(FormatUUID(u), "-", ""), "%q", s)
}

func TestPropUUIDForms(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var u [16]byte
		copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "u"))
		canon := FormatUUID(u)
		got, err := ParseUUID(canon)
		require.NoError(t, err)
		require.Equal(t, u, got)
		// Any grouping Postgres accepts: hyphens after chosen groups of four, any case, braces.
		digits := strings.ReplaceAll(canon, "-", "")
		var b strings.Builder
		for g := range 8 {
			chunk := digits[4*g : 4*g+4]
			if rapid.Bool().Draw(t, "upper") {
				chunk = strings.ToUpper(chunk)
			}
			b.WriteString(chunk)
			if g < 7 && rapid.Bool().Draw(t, "hyphen") {
				b.WriteByte('-')
			}
		}
		form := b.String()
		if rapid.Bool().Draw(t, "braces") {
			form = "{" + form + "}"
		}
		got, err = ParseUUID(form)
		require.NoError(t, err, form)
		require.Equal(t, u, got, form)
		// And a random mangling is judged by the grammar.
		mangled := []byte(form)
		i := rapid.IntRange(0, len(mangled)-1).Draw(t, "at")
		mangled[i] = rapid.SampledFrom([]byte("-{}g 0")).Draw(t, "with")
		checkParseUUID(t, string(mangled))
	})
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"123e4567-e89b-12d3-a456-426614174000", "{123e4567e89b12d3a456426614174000}",
		"123E4567-E89B12D3-A456-4266-1417-4000", "", "{", "123e4567-e89b-12d3-a456-42661417400", "-123e4567e89b12d3a456426614174000",
		"123e4567e89b12d3a456426614174000-", "{123e4567e89b12d3a456426614174000", "123e4567--e89b12d3a456426614174000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkParseUUID(t, s) })
}

// intGrammar is Postgres 15's integer input: whitespace, optional sign, digits, whitespace.
// Postgres accumulates the digits as a negative number and checks the range as it goes, so a
// magnitude beyond the most negative value is out of range even when junk follows it
// (intPrefix is what it has read by then); the one positive overflow it checks only after the
// syntax, so "2147483648A" is a syntax error for integer.
var (
	intGrammar = regexp.MustCompile(`^[ \t\n\r\v\f]*([+-]?[0-9]+)[ \t\n\r\v\f]*$`)
	intPrefix  = regexp.MustCompile(`^[ \t\n\r\v\f]*[+-]?([0-9]+)`)
)

func checkParseKeyInt(t require.TestingT, typ Type, bits int, s string) {
	r, err := ParseKey(typ, s)
	if p := intPrefix.FindStringSubmatch(s); p != nil {
		if _, perr := strconv.ParseInt("-"+p[1], 10, bits); perr != nil {
			require.ErrorIs(t, err, ErrOutOfRange, "%q", s)
			return
		}
	}
	m := intGrammar.FindStringSubmatch(s)
	if m == nil {
		require.ErrorIs(t, err, ErrSyntax, "%q", s)
		return
	}
	v, perr := strconv.ParseInt(m[1], 10, bits)
	if perr != nil {
		require.ErrorIs(t, err, ErrOutOfRange, "%q", s)
		return
	}
	require.NoError(t, err, "%q", s)
	var want Row
	want.Int8(v)
	require.Equal(t, want, r, "%q", s)
}

func FuzzParseKeyInt(f *testing.F) {
	for _, s := range []string{"0", " -1 ", "+5", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "2147483648", "-32769", "", "-", "1 2", "1e3", "\t\n42\f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseKeyInt(t, TypeInt8, 64, s)
		checkParseKeyInt(t, TypeInt4, 32, s)
		checkParseKeyInt(t, TypeInt2, 16, s)
	})
}

func TestParseType(t *testing.T) {
	for name, want := range map[string]Type{"bigint": TypeInt8, "INT8": TypeInt8, "integer": TypeInt4,
		"int": TypeInt4, "smallint": TypeInt2, "varchar(64)": TypeText, "character varying": TypeText,
		"text": TypeText, "char(5)": TypeBpchar, "bpchar": TypeBpchar, " uuid ": TypeUUID} {
		got, err := ParseType(name)
		require.NoError(t, err, name)
		require.Equal(t, want, got, name)
	}
	_, err := ParseType("numeric")
	require.ErrorIs(t, err, ErrUnknownType)
	require.Contains(t, err.Error(), `"numeric"`)
	_, err = ParseKey(Type(99), "1")
	require.ErrorIs(t, err, ErrUnknownType)
	require.Equal(t, "pghash.Type(99)", Type(99).String())
}

// TestZeroAllocs pins the hot path's promise.
func TestZeroAllocs(t *testing.T) {
	u := [16]byte{1, 2, 3}
	b := []byte("bytes")
	var out uint64
	for name, f := range map[string]func(){
		"ShardOfInt8":  func() { out += ShardOfInt8(-42, 7) },
		"ShardOfText":  func() { out += ShardOfText("some key", 7) },
		"ShardOfUUID":  func() { out += ShardOfUUID(u, 7) },
		"ShardOfBytea": func() { out += ShardOfBytea(b, 7) },
		"Row": func() {
			var r Row
			r.Int8(1)
			r.Text("x")
			r.Null()
			r.UUID(u)
			out += r.Remainder(7)
		},
		"ParseUUID": func() { v, _ := ParseUUID("123e4567-e89b-12d3-a456-426614174000"); out += uint64(v[0]) },
		"ParseKey":  func() { r, _ := ParseKey(TypeInt8, " -12345 "); out += r.Hash() },
	} {
		require.Zero(t, testing.AllocsPerRun(100, f), name)
	}
}
