package shardmap

import (
	"cmp"
	"strconv"
)

// Value is a sharding key value in a range or list rule: an integer (Bigint and Integer
// keys) or a string (Text keys, and UUID keys in their canonical text form).
type Value struct {
	isText bool
	i      int64
	s      string
}

// Int returns an integer value.
func Int(v int64) Value { return Value{i: v} }

// Str returns a text value.
func Str(s string) Value { return Value{isText: true, s: s} }

// IsText reports whether v is a string.
func (v Value) IsText() bool { return v.isText }

// AsInt returns the integer (0 for a text value).
func (v Value) AsInt() int64 { return v.i }

// AsText returns the string ("" for an integer value).
func (v Value) AsText() string { return v.s }

// String formats the value as it would appear in SQL or TOML: 42 or "eu".
func (v Value) String() string {
	if v.isText {
		return strconv.Quote(v.s)
	}
	return strconv.FormatInt(v.i, 10)
}

// Compare orders two values of the same kind: integers numerically, strings bytewise
// (PgDog compares range bounds of text keys as byte strings).
func (v Value) Compare(o Value) int {
	if v.isText != o.isText {
		if v.isText {
			return 1
		}
		return -1
	}
	if v.isText {
		return cmp.Compare(v.s, o.s)
	}
	return cmp.Compare(v.i, o.i)
}
