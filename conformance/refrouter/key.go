package refrouter

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// ErrNoRoute marks a key the router cannot send to exactly one shard: a value that does not
// parse as the key's type, a mapping no rule of which holds it, or a shard with no primary.
// PgDog sends such statements to every shard; the reference router never scatters, so it
// refuses them.
var ErrNoRoute = errors.New("refrouter: no single shard for this key")

// Key is how a database's statements pick their shard, read from its [[sharded_tables]]
// entries: PgDog's postgres hasher (Postgres hash partitioning, kernel/pghash) modulo the
// shard count, or list and range rules with an optional default when the entry has
// [[sharded_tables.mapping]] rules. The zero Key is an unsharded database.
type Key struct {
	Column  string
	Type    pghash.Type // TypeInt8 (bigint), TypeText (varchar) or TypeUUID
	Lists   []ListRule
	Ranges  []RangeRule
	Default *int
}

// ListRule sends the listed values to Shard.
type ListRule struct {
	Values []shardmap.Value
	Shard  int
}

// RangeRule sends values in [Start, End) to Shard; a nil bound is open.
type RangeRule struct {
	Start, End *shardmap.Value
	Shard      int
}

func (k Key) mapped() bool { return len(k.Lists) > 0 || len(k.Ranges) > 0 || k.Default != nil }

func (k Key) equal(o Key) bool {
	return k.Type == o.Type && slices.EqualFunc(k.Lists, o.Lists, func(a, b ListRule) bool {
		return a.Shard == b.Shard && slices.EqualFunc(a.Values, b.Values, func(x, y shardmap.Value) bool { return x.Compare(y) == 0 })
	}) && slices.EqualFunc(k.Ranges, o.Ranges, func(a, b RangeRule) bool {
		return a.Shard == b.Shard && optEqual(a.Start, b.Start) && optEqual(a.End, b.End)
	}) && optEqual(intValue(k.Default), intValue(o.Default))
}

func optEqual(a, b *shardmap.Value) bool {
	return a == nil && b == nil || a != nil && b != nil && a.Compare(*b) == 0
}

func intValue(p *int) *shardmap.Value {
	if p == nil {
		return nil
	}
	v := shardmap.Int(int64(*p))
	return &v
}

var dataTypes = map[string]pghash.Type{"": pghash.TypeInt8, "bigint": pghash.TypeInt8, "varchar": pghash.TypeText, "uuid": pghash.TypeUUID}

func parseKey(field string, tb tableTOML, shards int) (Key, error) {
	bad := func(format string, a ...any) (Key, error) {
		return Key{}, fmt.Errorf("%w: %s: %s", ErrBadFiles, field, fmt.Sprintf(format, a...))
	}
	t, ok := dataTypes[tb.DataType]
	if !ok {
		return bad("data_type %q: the reference router routes bigint, varchar and uuid keys", tb.DataType)
	}
	if tb.Hasher != "" && tb.Hasher != "postgres" {
		return bad("hasher %q: the reference router implements PgDog's default postgres hasher only", tb.Hasher)
	}
	if tb.Column == "" {
		return bad("no column")
	}
	k := Key{Column: tb.Column, Type: t}
	for j, m := range tb.Mapping {
		mf := fmt.Sprintf("mapping[%d]", j)
		if m.Shard == nil || *m.Shard < 0 || int(*m.Shard) >= shards {
			return bad("%s: shard must be one of the database's %d shards", mf, shards)
		}
		shard := int(*m.Shard)
		switch {
		case len(m.Values) > 0:
			if m.Start != nil || m.End != nil {
				return bad("%s: values and a range in one rule", mf)
			}
			r := ListRule{Shard: shard}
			for _, v := range m.Values {
				sv, err := configValue(t, v)
				if err != nil {
					return bad("%s: %v", mf, err)
				}
				r.Values = append(r.Values, sv)
			}
			k.Lists = append(k.Lists, r)
		case m.Start != nil || m.End != nil:
			r := RangeRule{Shard: shard}
			for _, b := range []struct {
				v   any
				dst **shardmap.Value
			}{{m.Start, &r.Start}, {m.End, &r.End}} {
				if b.v == nil {
					continue
				}
				sv, err := configValue(t, b.v)
				if err != nil {
					return bad("%s: %v", mf, err)
				}
				*b.dst = &sv
			}
			k.Ranges = append(k.Ranges, r)
		default:
			if k.Default != nil {
				return bad("%s: a second default rule", mf)
			}
			k.Default = &shard
		}
	}
	return k, nil
}

// configValue reads a mapping value of a key of type t.
func configValue(t pghash.Type, v any) (shardmap.Value, error) {
	switch x := v.(type) {
	case int64:
		if t == pghash.TypeInt8 {
			return shardmap.Int(x), nil
		}
	case string:
		if t != pghash.TypeInt8 {
			return shardmap.Str(x), nil
		}
	}
	return shardmap.Value{}, fmt.Errorf("value %v (%T) does not fit a %v key", v, v, t)
}

// keyValue converts a caller's key to the key type: an integer of any width (or its decimal
// text, as PgDog parses text parameters) for bigint, a string for varchar, a string or 16
// bytes for uuid.
func keyValue(t pghash.Type, key any) (shardmap.Value, [16]byte, error) {
	var u [16]byte
	switch t {
	case pghash.TypeInt8:
		switch x := key.(type) {
		case int:
			return shardmap.Int(int64(x)), u, nil
		case int8:
			return shardmap.Int(int64(x)), u, nil
		case int16:
			return shardmap.Int(int64(x)), u, nil
		case int32:
			return shardmap.Int(int64(x)), u, nil
		case int64:
			return shardmap.Int(x), u, nil
		case uint8:
			return shardmap.Int(int64(x)), u, nil
		case uint16:
			return shardmap.Int(int64(x)), u, nil
		case uint32:
			return shardmap.Int(int64(x)), u, nil
		case string:
			if _, err := pghash.ParseKey(pghash.TypeInt8, x); err != nil {
				return shardmap.Value{}, u, err
			}
			i, err := strconv.ParseInt(trimSpace(x), 10, 64)
			if err != nil {
				return shardmap.Value{}, u, err
			}
			return shardmap.Int(i), u, nil
		}
	case pghash.TypeText:
		if s, ok := key.(string); ok {
			return shardmap.Str(s), u, nil
		}
	case pghash.TypeUUID:
		switch x := key.(type) {
		case [16]byte:
			return shardmap.Str(pghash.FormatUUID(x)), x, nil
		case string:
			p, err := pghash.ParseUUID(x)
			if err != nil {
				return shardmap.Value{}, u, err
			}
			return shardmap.Str(pghash.FormatUUID(p)), p, nil
		}
	}
	return shardmap.Value{}, u, fmt.Errorf("a %T key does not fit a %v column", key, t)
}

// trimSpace drops the whitespace Postgres's int8in accepts around the digits.
func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// Shard returns the shard of key among n shards.
func (k Key) Shard(key any, n int) (int, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: the database has no shards", ErrNoRoute)
	}
	if k.Column == "" {
		if n == 1 {
			return 0, nil
		}
		return 0, fmt.Errorf("%w: the database has %d shards and no [[sharded_tables]] entry", ErrNoRoute, n)
	}
	v, u, err := keyValue(k.Type, key)
	if err != nil {
		return 0, fmt.Errorf("%w: key %v: %v", ErrNoRoute, key, err)
	}
	if k.mapped() {
		for _, r := range k.Lists {
			if slices.ContainsFunc(r.Values, func(x shardmap.Value) bool { return x.Compare(v) == 0 }) {
				return r.Shard, nil
			}
		}
		for _, r := range k.Ranges {
			if (r.Start == nil || r.Start.Compare(v) <= 0) && (r.End == nil || v.Compare(*r.End) < 0) {
				return r.Shard, nil
			}
		}
		if k.Default != nil {
			return *k.Default, nil
		}
		return 0, fmt.Errorf("%w: key %v matches no mapping rule and there is no default", ErrNoRoute, key)
	}
	switch k.Type {
	case pghash.TypeInt8:
		return int(pghash.ShardOfInt8(v.AsInt(), uint64(n))), nil
	case pghash.TypeText:
		return int(pghash.ShardOfText(v.AsText(), uint64(n))), nil
	default:
		return int(pghash.ShardOfUUID(u, uint64(n))), nil
	}
}
