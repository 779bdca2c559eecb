package shardmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"loam.dev/router/kernel/keyrange"
)

// FormatV1 is the first byte of the binary encoding. A decoder that meets another format
// byte refuses the record instead of guessing; a later format gets a new byte.
const FormatV1 byte = 1

// ErrEncoding is matched (errors.Is) by every error of MarshalBinary and Decode.
var ErrEncoding = errors.New("shardmap: bad encoding")

// The v1 layout, all integers as unsigned varints unless noted:
//
//	format(1 byte) version generation engine(byte) routerKind(byte) routerName(str)
//	layout state(phase byte, to, step byte) hasTarget(byte) [layout]
//	layout = scheme nShards {name(str) backend fence(byte)}
//	backend = host(str) port database(str) nReplicas {host(str) port} tablet(str)
//	scheme = tag(byte: 0 none, 1 pg_hash, 2 pg_range, 3 pg_list, 4 vindex) key ...
//	key = column(str) type(byte) nTables {str}
//	str = length bytes
//
// Nothing in it depends on map order or the machine, so equal records encode equally.

// MarshalBinary returns the canonical v1 encoding. It fails only for enum values that could
// not be decoded back. It does not validate: stores call Validate before they write.
func (r *Record) MarshalBinary() ([]byte, error) {
	if err := checkEncodable(r); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 64+len(r.Shards)*48)
	b = append(b, FormatV1)
	b = binary.AppendUvarint(b, r.Version)
	b = binary.AppendUvarint(b, r.Generation)
	b = append(b, byte(r.Engine), byte(r.Router.Kind))
	b = appendStr(b, r.Router.Name)
	var err error
	if b, err = appendLayout(b, r.Layout); err != nil {
		return nil, err
	}
	b = append(b, byte(r.State.Phase))
	b = binary.AppendUvarint(b, r.State.To)
	b = append(b, byte(r.State.Step))
	if r.Target == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		if b, err = appendLayout(b, *r.Target); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func checkEncodable(r *Record) error {
	bad := func(field string, v any) error {
		return fmt.Errorf("%w: %s has unknown value %v", ErrEncoding, field, v)
	}
	switch {
	case int(r.Engine) >= len(engineNames):
		return bad("engine", r.Engine)
	case int(r.Router.Kind) >= len(routerNames):
		return bad("router.kind", r.Router.Kind)
	case int(r.State.Phase) >= len(phaseNames):
		return bad("state.phase", r.State.Phase)
	case int(r.State.Step) >= len(stepNames):
		return bad("state.step", r.State.Step)
	}
	return nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendLayout(b []byte, l Layout) ([]byte, error) {
	b, err := appendScheme(b, l.Scheme)
	if err != nil {
		return b, err
	}
	b = binary.AppendUvarint(b, uint64(len(l.Shards)))
	for i, s := range l.Shards {
		if int(s.Fence) >= len(fenceNames) {
			return b, fmt.Errorf("%w: shards[%d].fence has unknown value %v", ErrEncoding, i, s.Fence)
		}
		b = appendStr(b, s.Name)
		b = appendBackend(b, s.Backend)
		b = append(b, byte(s.Fence))
	}
	return b, nil
}

func appendBackend(b []byte, be Backend) []byte {
	b = appendStr(b, be.Host)
	b = binary.AppendUvarint(b, uint64(be.Port))
	b = appendStr(b, be.Database)
	b = binary.AppendUvarint(b, uint64(len(be.Replicas)))
	for _, e := range be.Replicas {
		b = appendStr(b, e.Host)
		b = binary.AppendUvarint(b, uint64(e.Port))
	}
	return appendStr(b, be.Tablet)
}

func appendKey(b []byte, k Key) ([]byte, error) {
	if int(k.Type) >= len(keyTypeNames) {
		return b, fmt.Errorf("%w: scheme.key.type has unknown value %v", ErrEncoding, k.Type)
	}
	b = appendStr(b, k.Column)
	b = append(b, byte(k.Type))
	b = binary.AppendUvarint(b, uint64(len(k.Tables)))
	for _, t := range k.Tables {
		b = appendStr(b, t)
	}
	return b, nil
}

func appendValue(b []byte, v Value) []byte {
	if v.isText {
		return appendStr(append(b, 1), v.s)
	}
	return binary.AppendVarint(append(b, 0), v.i)
}

func appendOptValue(b []byte, v *Value) []byte {
	if v == nil {
		return append(b, 0)
	}
	return appendValue(append(b, 1), *v)
}

func appendOptU32(b []byte, v *uint32) []byte {
	if v == nil {
		return append(b, 0)
	}
	return binary.AppendUvarint(append(b, 1), uint64(*v))
}

func appendScheme(b []byte, s Scheme) ([]byte, error) {
	var err error
	switch s := s.(type) {
	case nil:
		return append(b, 0), nil
	case PgHash:
		if b, err = appendKey(append(b, 1), s.Key); err != nil {
			return b, err
		}
		return binary.AppendUvarint(b, uint64(s.Shards)), nil
	case PgRange:
		if b, err = appendKey(append(b, 2), s.Key); err != nil {
			return b, err
		}
		b = binary.AppendUvarint(b, uint64(len(s.Ranges)))
		for _, r := range s.Ranges {
			b = appendOptValue(b, r.Start)
			b = appendOptValue(b, r.End)
			b = binary.AppendUvarint(b, uint64(r.Shard))
		}
		return appendOptU32(b, s.Default), nil
	case PgList:
		if b, err = appendKey(append(b, 3), s.Key); err != nil {
			return b, err
		}
		b = binary.AppendUvarint(b, uint64(len(s.Lists)))
		for _, l := range s.Lists {
			b = binary.AppendUvarint(b, uint64(len(l.Values)))
			for _, v := range l.Values {
				b = appendValue(b, v)
			}
			b = binary.AppendUvarint(b, uint64(l.Shard))
		}
		return appendOptU32(b, s.Default), nil
	case Vindex:
		if int(s.Kind) >= len(vindexNames) {
			return b, fmt.Errorf("%w: scheme.vindex has unknown value %v", ErrEncoding, s.Kind)
		}
		if b, err = appendKey(append(b, 4), s.Key); err != nil {
			return b, err
		}
		b = append(b, byte(s.Kind))
		b = binary.AppendUvarint(b, uint64(len(s.Ranges)))
		for _, r := range s.Ranges {
			b = appendStr(b, r.String())
		}
		return b, nil
	}
	return b, fmt.Errorf("%w: scheme has unknown type %T", ErrEncoding, s)
}

// Decode reads a record written by MarshalBinary. It never panics: truncated, oversized,
// trailing or unknown input is an error that says where decoding stopped.
func Decode(data []byte) (*Record, error) {
	r := new(Record)
	if err := r.UnmarshalBinary(data); err != nil {
		return nil, err
	}
	return r, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler; see Decode.
func (r *Record) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty input", ErrEncoding)
	}
	if data[0] != FormatV1 {
		return fmt.Errorf("%w: unknown format byte 0x%02x (this build reads format 0x%02x; upgrade the reader)", ErrEncoding, data[0], FormatV1)
	}
	d := &decoder{b: data, off: 1}
	var out Record
	out.Version = d.uvarint("version")
	out.Generation = d.uvarint("generation")
	out.Engine = Engine(d.enum("engine", len(engineNames)))
	out.Router.Kind = RouterKind(d.enum("router.kind", len(routerNames)))
	out.Router.Name = d.str("router.name")
	out.Layout = d.layout("")
	out.State.Phase = Phase(d.enum("state.phase", len(phaseNames)))
	out.State.To = d.uvarint("state.to")
	out.State.Step = CutoverStep(d.enum("state.step", len(stepNames)))
	switch d.enum("target", 2) {
	case 1:
		t := d.layout("target.")
		out.Target = &t
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("end", "%d trailing bytes", len(d.b)-d.off)
	}
	if d.err != nil {
		return d.err
	}
	*r = out
	return nil
}

type decoder struct {
	b   []byte
	off int
	err error
	// idx fills the "[]" of field paths in error messages, innermost last; paths are
	// formatted only on failure so decoding a good record allocates only what it returns.
	idx    []int
	prefix string // "target." while decoding the target layout
}

func (d *decoder) fail(field, format string, a ...any) {
	if d.err != nil {
		return
	}
	if strings.HasPrefix(field, "scheme") || strings.HasPrefix(field, "shards") {
		field = d.prefix + field
	}
	for _, i := range d.idx {
		field = strings.Replace(field, "[]", fmt.Sprintf("[%d]", i), 1)
	}
	d.err = fmt.Errorf("%w: at byte %d (%s): %s", ErrEncoding, d.off, field, fmt.Sprintf(format, a...))
}

func (d *decoder) push(i int) { d.idx = append(d.idx, i) }
func (d *decoder) pop()       { d.idx = d.idx[:len(d.idx)-1] }

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(field, "truncated or overlong varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail(field, "truncated or overlong varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte1(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(field, "truncated")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) enum(field string, n int) byte {
	c := d.byte1(field)
	if d.err == nil && int(c) >= n {
		d.fail(field, "unknown value %d", c)
		return 0
	}
	return c
}

// count reads a length and refuses one larger than the bytes left (each item takes at
// least one byte), so a corrupt length cannot make the decoder allocate without bound.
func (d *decoder) count(field string) int {
	n := d.uvarint(field)
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.fail(field, "count %d exceeds the %d bytes left", n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) u16(field string) uint16 {
	v := d.uvarint(field)
	if d.err == nil && v > 0xffff {
		d.fail(field, "port %d out of range", v)
		return 0
	}
	return uint16(v)
}

func (d *decoder) u32(field string) uint32 {
	v := d.uvarint(field)
	if d.err == nil && v > 0xffffffff {
		d.fail(field, "%d out of range for uint32", v)
		return 0
	}
	return uint32(v)
}

func (d *decoder) str(field string) string {
	n := d.count(field)
	if d.err != nil {
		return ""
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s
}

func (d *decoder) layout(prefix string) Layout {
	d.prefix = prefix
	var l Layout
	l.Scheme = d.scheme()
	n := d.count("shards")
	if n > 0 {
		l.Shards = make([]Shard, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		d.push(i)
		var s Shard
		s.Name = d.str("shards[].name")
		s.Backend = d.backend()
		s.Fence = Fence(d.enum("shards[].fence", len(fenceNames)))
		l.Shards = append(l.Shards, s)
		d.pop()
	}
	return l
}

func (d *decoder) backend() Backend {
	var b Backend
	b.Host = d.str("shards[].backend.host")
	b.Port = d.u16("shards[].backend.port")
	b.Database = d.str("shards[].backend.database")
	n := d.count("shards[].backend.replicas")
	if n > 0 {
		b.Replicas = make([]Endpoint, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		d.push(i)
		b.Replicas = append(b.Replicas, Endpoint{Host: d.str("shards[].backend.replicas[].host"), Port: d.u16("shards[].backend.replicas[].port")})
		d.pop()
	}
	b.Tablet = d.str("shards[].backend.tablet")
	return b
}

func (d *decoder) key() Key {
	var k Key
	k.Column = d.str("scheme.key.column")
	k.Type = KeyType(d.enum("scheme.key.type", len(keyTypeNames)))
	n := d.count("scheme.key.tables")
	if n > 0 {
		k.Tables = make([]string, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		d.push(i)
		k.Tables = append(k.Tables, d.str("scheme.key.tables[]"))
		d.pop()
	}
	return k
}

func (d *decoder) value(f string) Value {
	switch d.enum(f, 2) {
	case 1:
		return Str(d.str(f))
	default:
		return Int(d.varint(f))
	}
}

func (d *decoder) optValue(f string) *Value {
	if d.enum(f, 2) == 0 || d.err != nil {
		return nil
	}
	v := d.value(f)
	return &v
}

func (d *decoder) optU32(f string) *uint32 {
	if d.enum(f, 2) == 0 || d.err != nil {
		return nil
	}
	v := d.u32(f)
	return &v
}

func (d *decoder) scheme() Scheme {
	tag := d.enum("scheme", 5)
	if d.err != nil || tag == 0 {
		return nil
	}
	k := d.key()
	switch tag {
	case 1:
		return PgHash{Key: k, Shards: d.u32("scheme.shards")}
	case 2:
		s := PgRange{Key: k}
		n := d.count("scheme.ranges")
		if n > 0 {
			s.Ranges = make([]RangeRule, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			d.push(i)
			s.Ranges = append(s.Ranges, RangeRule{Start: d.optValue("scheme.ranges[].start"), End: d.optValue("scheme.ranges[].end"), Shard: d.u32("scheme.ranges[].shard")})
			d.pop()
		}
		s.Default = d.optU32("scheme.default")
		return s
	case 3:
		s := PgList{Key: k}
		n := d.count("scheme.lists")
		if n > 0 {
			s.Lists = make([]ListRule, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			d.push(i)
			var l ListRule
			m := d.count("scheme.lists[].values")
			if m > 0 {
				l.Values = make([]Value, 0, m)
			}
			for j := 0; j < m && d.err == nil; j++ {
				d.push(j)
				l.Values = append(l.Values, d.value("scheme.lists[].values[]"))
				d.pop()
			}
			l.Shard = d.u32("scheme.lists[].shard")
			s.Lists = append(s.Lists, l)
			d.pop()
		}
		s.Default = d.optU32("scheme.default")
		return s
	default:
		s := Vindex{Key: k, Kind: VindexKind(d.enum("scheme.vindex", len(vindexNames)))}
		n := d.count("scheme.ranges")
		if n > 0 {
			s.Ranges = make([]keyrange.Range, 0, n)
		}
		for i := 0; i < n && d.err == nil; i++ {
			d.push(i)
			name := d.str("scheme.ranges[]")
			r, err := keyrange.Parse(name)
			if err != nil {
				d.fail("scheme.ranges[]", "%v", err)
			}
			s.Ranges = append(s.Ranges, r)
			d.pop()
		}
		return s
	}
}
