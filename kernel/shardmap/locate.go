package shardmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/vindex"
)

// ErrNoShard marks a key no rule of a range or list scheme holds, when the scheme has no
// default shard. PgDog sends such a statement to every shard; a single-shard answer does not
// exist, so Locate says so instead of guessing.
var ErrNoShard = errors.New("shardmap: no shard holds this key")

// ErrBadKey marks a key whose text does not parse as the scheme's key type.
var ErrBadKey = errors.New("shardmap: key does not parse as the key type")

// Location is where a key routes, and why, in words a person can check by hand.
type Location struct {
	Shard int
	Name  string
	// Why is e.g. "hashint8extended partition hash 0x9c7715e2970a8fb8 mod 4 = 0",
	// "keyspace id 0x166b40b44aba4bd6 is in range -40", or "list rule lists[1] holds \"eu\"".
	Why string
}

// Locate returns the shard the key routes to under the layout, the key written as SQL would
// spell it for the layout's key type ("42", "eu", a uuid in any form Postgres accepts). It
// uses the same kernels the routers match bit for bit: Postgres hash partitioning for
// pg_hash (what PgDog does), PgDog's rule order for lists and ranges (lists, then ranges,
// then the default), and the Vitess vindex plus the keyspace-ID ranges for vindex schemes.
func (l Layout) Locate(key string) (Location, error) {
	at := func(i int, why string, a ...any) (Location, error) {
		if i < 0 || i >= len(l.Shards) {
			return Location{}, fmt.Errorf("shardmap: the scheme sends %q to shard %d but the layout has %d shards (validate the record)", key, i, len(l.Shards))
		}
		return Location{Shard: i, Name: l.Shards[i].Name, Why: fmt.Sprintf(why, a...)}, nil
	}
	switch s := l.Scheme.(type) {
	case PgHash:
		if s.Shards == 0 {
			return Location{}, fmt.Errorf("shardmap: pg_hash scheme has 0 shards")
		}
		t, err := pgType(s.Key.Type)
		if err != nil {
			return Location{}, err
		}
		row, err := pghash.ParseKey(t, key)
		if err != nil {
			return Location{}, fmt.Errorf("%w: %q as %v: %v", ErrBadKey, key, s.Key.Type, err)
		}
		r := row.Remainder(uint64(s.Shards))
		return at(int(r), "partition hash 0x%016x of %v %s mod %d = %d", row.Hash(), s.Key.Type, key, s.Shards, r)
	case PgList:
		v, err := parseValue(s.Key.Type, key)
		if err != nil {
			return Location{}, err
		}
		for i, rule := range s.Lists {
			for _, lv := range rule.Values {
				if lv.Compare(v) == 0 {
					return at(int(rule.Shard), "list rule lists[%d] holds %s", i, v)
				}
			}
		}
		return locateDefault(s.Default, v, at)
	case PgRange:
		v, err := parseValue(s.Key.Type, key)
		if err != nil {
			return Location{}, err
		}
		for i, rule := range s.Ranges {
			if (rule.Start == nil || rule.Start.Compare(v) <= 0) && (rule.End == nil || v.Compare(*rule.End) < 0) {
				return at(int(rule.Shard), "range rule ranges[%d] [%s, %s) holds %s", i, bound(rule.Start, "min"), bound(rule.End, "max"), v)
			}
		}
		return locateDefault(s.Default, v, at)
	case Vindex:
		ksid, err := keyspaceID(s, key)
		if err != nil {
			return Location{}, err
		}
		id := binary.BigEndian.Uint64(ksid[:])
		for i, r := range s.Ranges {
			if r.Contains(id) {
				return at(i, "%s vindex keyspace id 0x%016x is in range %s", s.Kind, id, r)
			}
		}
		return Location{}, fmt.Errorf("shardmap: keyspace id 0x%016x is in no range (validate the record: the ranges must partition the keyspace)", id)
	case nil:
		return Location{}, errors.New("shardmap: the layout has no scheme")
	}
	return Location{}, fmt.Errorf("shardmap: unknown scheme %T", l.Scheme)
}

// LocateNull returns where a row with a NULL key routes. Postgres hash partitioning gives a
// NULL key the row hash 0, so remainder 0; the other schemes have no shard for NULL.
func (l Layout) LocateNull() (Location, error) {
	if _, ok := l.Scheme.(PgHash); ok && len(l.Shards) > 0 {
		return Location{Shard: 0, Name: l.Shards[0].Name, Why: "a NULL key has partition hash 0, remainder 0"}, nil
	}
	return Location{}, fmt.Errorf("%w: NULL under a %s scheme", ErrNoShard, SchemeKind(l.Scheme))
}

// Partition returns the layout's keyspace-ID partition for lookups; only vindex layouts
// have one.
func (l Layout) Partition() (*keyrange.Partition, error) {
	s, ok := l.Scheme.(Vindex)
	if !ok {
		return nil, fmt.Errorf("shardmap: a %s scheme has no keyspace-ID ranges", SchemeKind(l.Scheme))
	}
	return keyrange.NewPartition(s.Ranges)
}

func locateDefault(d *uint32, v Value, at func(int, string, ...any) (Location, error)) (Location, error) {
	if d == nil {
		return Location{}, fmt.Errorf("%w: no rule holds %s and the scheme has no default shard", ErrNoShard, v)
	}
	return at(int(*d), "no rule holds %s: the default shard", v)
}

func bound(v *Value, open string) string {
	if v == nil {
		return open
	}
	return v.String()
}

func pgType(t KeyType) (pghash.Type, error) {
	switch t {
	case Bigint:
		return pghash.TypeInt8, nil
	case Integer:
		return pghash.TypeInt4, nil
	case Text:
		return pghash.TypeText, nil
	case UUID:
		return pghash.TypeUUID, nil
	}
	return 0, fmt.Errorf("shardmap: key type %v has no hash function", t)
}

// parseValue reads key text as a rule value of type t: integers as Postgres reads them
// (surrounding spaces allowed), uuids in any accepted form compared in canonical form.
func parseValue(t KeyType, key string) (Value, error) {
	switch t {
	case Bigint, Integer:
		i, err := strconv.ParseInt(strings.TrimSpace(key), 10, 64)
		if err != nil || t == Integer && (i < math.MinInt32 || i > math.MaxInt32) {
			return Value{}, fmt.Errorf("%w: %q is not a%s", ErrBadKey, key, map[KeyType]string{Bigint: " bigint", Integer: "n integer"}[t])
		}
		return Int(i), nil
	case Text:
		return Str(key), nil
	case UUID:
		u, err := pghash.ParseUUID(key)
		if err != nil {
			return Value{}, fmt.Errorf("%w: %q is not a uuid: %v", ErrBadKey, key, err)
		}
		return Str(pghash.FormatUUID(u)), nil
	}
	return Value{}, fmt.Errorf("shardmap: unknown key type %v", t)
}

func keyspaceID(s Vindex, key string) ([8]byte, error) {
	switch s.Kind {
	case VindexHash:
		switch s.Key.Type {
		case Bigint, Integer:
			i, err := strconv.ParseInt(strings.TrimSpace(key), 10, 64)
			if err != nil {
				return [8]byte{}, fmt.Errorf("%w: %q is not an integer: %v", ErrBadKey, key, err)
			}
			return vindex.Hash(uint64(i)), nil
		}
		ksid, err := vindex.HashText(key)
		if err != nil {
			return [8]byte{}, fmt.Errorf("%w: %q: %v", ErrBadKey, key, err)
		}
		return ksid, nil
	case VindexXXHash:
		switch s.Key.Type {
		case Bigint, Integer:
			i, err := strconv.ParseInt(strings.TrimSpace(key), 10, 64)
			if err != nil {
				return [8]byte{}, fmt.Errorf("%w: %q is not an integer: %v", ErrBadKey, key, err)
			}
			return vindex.XXHashInt64(i), nil
		}
		return vindex.XXHashString(key), nil
	}
	return [8]byte{}, fmt.Errorf("shardmap: unknown vindex %v", s.Kind)
}
