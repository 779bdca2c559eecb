package refrouter

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// ErrNoRoute marks a key the router cannot send to exactly one shard: a value that does not
// parse as the key's type, a mapping no rule of which holds it, or a shard with no primary.
// PgDog sends such statements to every shard; the reference router never scatters, so it
// refuses them.
var ErrNoRoute = errors.New("refrouter: no single shard for this key")

// PgDog's data_type names and the key types they hash as.
var dataTypes = map[string]shardmap.KeyType{"": shardmap.Bigint, "bigint": shardmap.Bigint, "varchar": shardmap.Text, "uuid": shardmap.UUID}

// parseScheme reads a [[sharded_tables]] entry as the scheme it routes by: PgDog's default
// postgres hasher is Postgres hash partitioning modulo the shard count (shardmap.PgHash);
// mapping rules are list rules or range rules, with an optional default.
func parseScheme(field string, tb tableTOML, shards int) (shardmap.Scheme, error) {
	bad := func(format string, a ...any) (shardmap.Scheme, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrBadFiles, field, fmt.Sprintf(format, a...))
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
	key := shardmap.Key{Column: tb.Column, Type: t}
	if len(tb.Mapping) == 0 {
		return shardmap.PgHash{Key: key, Shards: uint32(shards)}, nil
	}
	var lists []shardmap.ListRule
	var ranges []shardmap.RangeRule
	var def *uint32
	for j, m := range tb.Mapping {
		mf := fmt.Sprintf("mapping[%d]", j)
		if m.Shard == nil || *m.Shard < 0 || int(*m.Shard) >= shards {
			return bad("%s: shard must be one of the database's %d shards", mf, shards)
		}
		shard := uint32(*m.Shard)
		switch {
		case len(m.Values) > 0:
			if m.Start != nil || m.End != nil {
				return bad("%s: values and a range in one rule", mf)
			}
			r := shardmap.ListRule{Shard: shard}
			for _, v := range m.Values {
				sv, err := configValue(t, v)
				if err != nil {
					return bad("%s: %v", mf, err)
				}
				r.Values = append(r.Values, sv)
			}
			lists = append(lists, r)
		case m.Start != nil || m.End != nil:
			r := shardmap.RangeRule{Shard: shard}
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
			ranges = append(ranges, r)
		default:
			if def != nil {
				return bad("%s: a second default rule", mf)
			}
			def = &shard
		}
	}
	if len(lists) > 0 && len(ranges) > 0 {
		return bad("list and range rules on one key: the reference router routes by one kind of rule")
	}
	if len(ranges) > 0 {
		return shardmap.PgRange{Key: key, Ranges: ranges, Default: def}, nil
	}
	return shardmap.PgList{Key: key, Lists: lists, Default: def}, nil
}

func sameScheme(a, b shardmap.Scheme) bool { return reflect.DeepEqual(a, b) }

// configValue reads a mapping value of a key of type t: an integer for bigint keys, a
// string for varchar keys, a uuid (compared in canonical form) for uuid keys.
func configValue(t shardmap.KeyType, v any) (shardmap.Value, error) {
	switch x := v.(type) {
	case int64:
		if t == shardmap.Bigint {
			return shardmap.Int(x), nil
		}
	case string:
		switch t {
		case shardmap.Text:
			return shardmap.Str(x), nil
		case shardmap.UUID:
			u, err := pghash.ParseUUID(x)
			if err != nil {
				return shardmap.Value{}, err
			}
			return shardmap.Str(pghash.FormatUUID(u)), nil
		}
	}
	return shardmap.Value{}, fmt.Errorf("value %v (%T) does not fit a %v key", v, v, t)
}

// keyText writes a caller's key as SQL spells it: integers in decimal, strings as they
// are, 16 bytes as a uuid.
func keyText(key any) (string, error) {
	switch x := key.(type) {
	case int:
		return strconv.Itoa(x), nil
	case int8:
		return strconv.FormatInt(int64(x), 10), nil
	case int16:
		return strconv.FormatInt(int64(x), 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint8:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case string:
		return x, nil
	case [16]byte:
		return pghash.FormatUUID(x), nil
	}
	return "", fmt.Errorf("a %T key: use an integer, a string or a [16]byte uuid", key)
}

// Shard returns the shard of key in db: the value of the sharding column as an integer of
// any width, a string (decimal text for a bigint key, as PgDog parses text parameters) or
// a [16]byte uuid. The choice is shardmap.Layout.Locate's, which uses the kernels PgDog's
// routing matches (Postgres hash partitioning; lists, then ranges, then the default).
func (db *Database) Shard(key any) (int, error) {
	n := len(db.Shards)
	switch {
	case n == 0:
		return 0, fmt.Errorf("%w: database %q has no shards", ErrNoRoute, db.Name)
	case db.Scheme == nil && n == 1:
		return 0, nil
	case db.Scheme == nil:
		return 0, fmt.Errorf("%w: database %q has %d shards and no [[sharded_tables]] entry", ErrNoRoute, db.Name, n)
	}
	text, err := keyText(key)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoRoute, err)
	}
	l := db.layout
	if l.Scheme == nil || len(l.Shards) != n {
		l = shardmap.Layout{Scheme: db.Scheme, Shards: make([]shardmap.Shard, n)} // a Database not from ParseFiles
	}
	loc, err := l.Locate(text)
	if err != nil {
		return 0, fmt.Errorf("%w: database %q: %w", ErrNoRoute, db.Name, err)
	}
	return loc.Shard, nil
}
