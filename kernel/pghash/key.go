package pghash

import (
	"errors"
	"fmt"
	"strings"
)

// Type is the Postgres type of a single-column shard key, for callers that hold keys as text
// (configuration, SQL literals, the text-format parameters PgDog sees).
type Type uint8

// The key types this package can route. A varchar key is TypeText (Postgres gives varchar
// the text operator class).
const (
	TypeInt2 Type = iota + 1
	TypeInt4
	TypeInt8
	TypeText
	TypeBpchar
	TypeUUID
)

var typeNames = [...]string{TypeInt2: "smallint", TypeInt4: "integer", TypeInt8: "bigint",
	TypeText: "text", TypeBpchar: "character", TypeUUID: "uuid"}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("pghash.Type(%d)", uint8(t))
}

// ErrUnknownType marks a type name ParseType does not know.
var ErrUnknownType = errors.New("not a hash-routable key type")

// ParseType reads a type name as Postgres spells it (any case): the SQL names and the
// internal ones (int8, bpchar, ...). Lengths and modifiers ("varchar(64)") are ignored.
func ParseType(name string) (Type, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if i := strings.IndexByte(n, '('); i >= 0 {
		n = strings.TrimSpace(n[:i])
	}
	switch n {
	case "smallint", "int2":
		return TypeInt2, nil
	case "integer", "int", "int4":
		return TypeInt4, nil
	case "bigint", "int8":
		return TypeInt8, nil
	case "text", "varchar", "character varying":
		return TypeText, nil
	case "character", "char", "bpchar":
		return TypeBpchar, nil
	case "uuid":
		return TypeUUID, nil
	}
	return 0, fmt.Errorf("pghash: type %q: %w (use smallint, integer, bigint, text, varchar, char or uuid)", name, ErrUnknownType)
}

// ParseKey reads the text form of a key of type t, as Postgres's input function for t
// would, and returns the row hash of a single-column key holding it: the value a Row with that
// one column has. Integers accept surrounding whitespace and a sign, as Postgres 15 does.
func ParseKey(t Type, text string) (Row, error) {
	var r Row
	switch t {
	case TypeInt2, TypeInt4, TypeInt8:
		bitSize := 64
		switch t {
		case TypeInt2:
			bitSize = 16
		case TypeInt4:
			bitSize = 32
		}
		v, err := parseInt(text, bitSize, t.String())
		if err != nil {
			return r, err
		}
		r.Int8(v) // int2 and int4 hash like the same int8
	case TypeText:
		r.Text(text)
	case TypeBpchar:
		r.Bpchar(text)
	case TypeUUID:
		u, err := ParseUUID(text)
		if err != nil {
			return r, err
		}
		r.UUID(u)
	default:
		return r, fmt.Errorf("pghash: key type %v: %w", t, ErrUnknownType)
	}
	return r, nil
}

// ErrOutOfRange marks an integer key outside its type (SQLSTATE 22003 in Postgres).
var ErrOutOfRange = errors.New("value out of range")

// parseInt reads an integer as Postgres 15's int2in/int4in/int8in: optional whitespace, an
// optional sign, one or more decimal digits, optional whitespace.
func parseInt(text string, bitSize int, typ string) (int64, error) {
	s := strings.TrimLeft(text, " \t\n\r\v\f")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	limit := uint64(1) << (bitSize - 1) // magnitude of the most negative value
	var mag uint64
	digits := 0
	for ; digits < len(s) && '0' <= s[digits] && s[digits] <= '9'; digits++ {
		d := uint64(s[digits] - '0')
		if mag > (limit-d)/10 {
			return 0, fmt.Errorf("pghash: %q is out of range for type %s: %w (SQLSTATE 22003)", text, typ, ErrOutOfRange)
		}
		mag = mag*10 + d
	}
	if digits == 0 {
		return 0, &SyntaxError{Type: typ, Text: text, Reason: "no digits"}
	}
	if rest := strings.TrimLeft(s[digits:], " \t\n\r\v\f"); rest != "" {
		return 0, &SyntaxError{Type: typ, Text: text, Reason: fmt.Sprintf("unexpected %q after the number", rest)}
	}
	if !neg {
		if mag == limit {
			return 0, fmt.Errorf("pghash: %q is out of range for type %s: %w (SQLSTATE 22003)", text, typ, ErrOutOfRange)
		}
		return int64(mag), nil
	}
	return -int64(mag), nil // for mag == limit this wraps to the minimum, which is right
}

// ShardOfKey is the shard, among shards, of a one-column key of type t written as text: the
// typed counterpart of ShardOfInt8, ShardOfText and ShardOfUUID for callers that hold keys the
// way configuration and SQL do.
func ShardOfKey(t Type, text string, shards uint64) (uint64, error) {
	r, err := ParseKey(t, text)
	if err != nil {
		return 0, err
	}
	return r.Remainder(shards), nil
}
