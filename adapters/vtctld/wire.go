package vtctld

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages of vtctld's Vtctld service that the client sends and reads, encoded and
// decoded here in protobuf's wire format, field by field, with the numbers of Vitess
// v0.24.4's proto/vtctldata.proto, topodata.proto and vschema.proto. Encoding them here,
// rather than importing Vitess's generated packages, keeps vitess.io/vitess (and its
// `go 1.26.8` and exclude directive) out of loam.dev/router's module graph. Fields the
// client does not read are skipped, as a generated decoder keeps them unknown. The tests
// against a real vtctld (conformance/vitesstest) hold every message to Vitess's own code.

// message is a request: its wire encoding.
type message interface{ marshal() []byte }

// reply is a response: decoded in place from its wire encoding.
type reply interface{ unmarshal([]byte) error }

// field is one decoded field: a varint or a length-delimited value (other wire types are
// skipped before they reach a message's decoder).
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

// fields calls f for every field of the message encoded in b, in order.
func fields(b []byte, f func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("vtctld: malformed reply: %w", protowire.ParseError(n))
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fl.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			fl.bytes, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("vtctld: malformed reply: field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := f(fl); err != nil {
			return err
		}
	}
	return nil
}

// want checks a known field has the wire type its declaration gives it.
func (fl field) want(t protowire.Type) error {
	if fl.typ != t {
		return fmt.Errorf("vtctld: malformed reply: field %d has wire type %d, want %d", fl.num, fl.typ, t)
	}
	return nil
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

// appendMap encodes a map field: one entry message {1: key, 2: value} per key, in key order
// so that the encoding is deterministic. value appends the value's bytes: a message's
// encoding, or a string's bytes.
func appendMap[V any](b []byte, num protowire.Number, m map[string]V, value func([]byte, V) []byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), k)
		entry = appendBytes(entry, 2, value(nil, m[k]))
		b = appendBytes(b, num, entry)
	}
	return b
}

// mapEntry decodes a map entry message: its key and its value's bytes.
func mapEntry(b []byte) (key string, value []byte, err error) {
	err = fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			key = string(fl.bytes)
		case 2:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			value = fl.bytes
		}
		return nil
	})
	return key, value, err
}

// tabletAlias is topodata.TabletAlias {1: cell, 2: uid}.
type tabletAlias struct {
	cell string
	uid  uint32
}

func (a tabletAlias) marshal() []byte {
	return appendVarint(appendString(nil, 1, a.cell), 2, uint64(a.uid))
}

func (a *tabletAlias) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			a.cell = string(fl.bytes)
		case 2:
			if err := fl.want(protowire.VarintType); err != nil {
				return err
			}
			if fl.varint > 1<<32-1 {
				return fmt.Errorf("vtctld: malformed reply: tablet uid %d does not fit 32 bits", fl.varint)
			}
			a.uid = uint32(fl.varint)
		}
		return nil
	})
}

// tabletRecord is the part of topodata.Tablet the client reads: {1: alias, 5: keyspace,
// 6: shard, 8: type, 9: db_name_override, 12: mysql_hostname, 13: mysql_port}.
type tabletRecord struct {
	alias           tabletAlias
	keyspace, shard string
	typ             int32
	dbName          string
	mysqlHost       string
	mysqlPort       int32
}

func (t *tabletRecord) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			return t.alias.unmarshal(fl.bytes)
		case 5:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			t.keyspace = string(fl.bytes)
		case 6:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			t.shard = string(fl.bytes)
		case 8:
			if err := fl.want(protowire.VarintType); err != nil {
				return err
			}
			t.typ = int32(fl.varint)
		case 9, 12:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			if fl.num == 9 {
				t.dbName = string(fl.bytes)
			} else {
				t.mysqlHost = string(fl.bytes)
			}
		case 13:
			if err := fl.want(protowire.VarintType); err != nil {
				return err
			}
			t.mysqlPort = int32(fl.varint)
		}
		return nil
	})
}

// getTabletsRequest is vtctldata.GetTabletsRequest {4: strict, 5: tablet_aliases}.
type getTabletsRequest struct {
	aliases []tabletAlias
	strict  bool
}

func (r getTabletsRequest) marshal() []byte {
	b := appendBool(nil, 4, r.strict)
	for _, a := range r.aliases {
		b = appendBytes(b, 5, a.marshal())
	}
	return b
}

// getTabletsResponse is vtctldata.GetTabletsResponse {1: tablets}.
type getTabletsResponse struct{ tablets []tabletRecord }

func (r *getTabletsResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		var t tabletRecord
		if err := t.unmarshal(fl.bytes); err != nil {
			return err
		}
		r.tablets = append(r.tablets, t)
		return nil
	})
}

// reparentRequest is vtctldata.TabletExternallyReparentedRequest {1: tablet}.
type reparentRequest struct{ tablet tabletAlias }

func (r reparentRequest) marshal() []byte { return appendBytes(nil, 1, r.tablet.marshal()) }

// reparentResponse is vtctldata.TabletExternallyReparentedResponse {1: keyspace, 2: shard,
// 3: new_primary, 4: old_primary}.
type reparentResponse struct {
	keyspace, shard        string
	newPrimary, oldPrimary *tabletAlias
}

func (r *reparentResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num < 1 || fl.num > 4 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		switch fl.num {
		case 1:
			r.keyspace = string(fl.bytes)
		case 2:
			r.shard = string(fl.bytes)
		case 3:
			r.newPrimary = &tabletAlias{}
			return r.newPrimary.unmarshal(fl.bytes)
		case 4:
			r.oldPrimary = &tabletAlias{}
			return r.oldPrimary.unmarshal(fl.bytes)
		}
		return nil
	})
}

// srvKeyspacesRequest is vtctldata.GetSrvKeyspacesRequest {1: keyspace, 2: cells}.
type srvKeyspacesRequest struct {
	keyspace string
	cells    []string
}

func (r srvKeyspacesRequest) marshal() []byte {
	b := appendString(nil, 1, r.keyspace)
	for _, c := range r.cells {
		b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), c)
	}
	return b
}

// srvKeyspacesResponse is vtctldata.GetSrvKeyspacesResponse {1: map cell ->
// topodata.SrvKeyspace}.
type srvKeyspacesResponse struct{ byCell map[string]*srvKeyspace }

func (r *srvKeyspacesResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		cell, v, err := mapEntry(fl.bytes)
		if err != nil {
			return err
		}
		var s srvKeyspace
		if err := s.unmarshal(v); err != nil {
			return err
		}
		if r.byCell == nil {
			r.byCell = map[string]*srvKeyspace{}
		}
		r.byCell[cell] = &s
		return nil
	})
}

// srvKeyspace is topodata.SrvKeyspace {1: partitions}.
type srvKeyspace struct{ partitions []partition }

// partition is topodata.SrvKeyspace.KeyspacePartition {1: served_type, 2: shard_references}.
type partition struct {
	servedType int32
	refs       []shardReference
}

// shardReference is topodata.ShardReference {1: name, 2: key_range}; keyRange is nil when
// the reference has none.
type shardReference struct {
	name     string
	keyRange *keyRange
}

// keyRange is topodata.KeyRange {1: start, 2: end}.
type keyRange struct{ start, end []byte }

func (s *srvKeyspace) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		var p partition
		err := fields(fl.bytes, func(fl field) error {
			switch fl.num {
			case 1:
				if err := fl.want(protowire.VarintType); err != nil {
					return err
				}
				p.servedType = int32(fl.varint)
			case 2:
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				ref, err := unmarshalShardReference(fl.bytes)
				if err != nil {
					return err
				}
				p.refs = append(p.refs, ref)
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.partitions = append(s.partitions, p)
		return nil
	})
}

func unmarshalShardReference(b []byte) (shardReference, error) {
	var ref shardReference
	err := fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			ref.name = string(fl.bytes)
		case 2:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			kr := &keyRange{}
			ref.keyRange = kr
			return fields(fl.bytes, func(fl field) error {
				if fl.num != 1 && fl.num != 2 {
					return nil
				}
				if err := fl.want(protowire.BytesType); err != nil {
					return err
				}
				if fl.num == 1 {
					kr.start = fl.bytes
				} else {
					kr.end = fl.bytes
				}
				return nil
			})
		}
		return nil
	})
	return ref, err
}

// applyVSchemaRequest is vtctldata.ApplyVSchemaRequest {1: keyspace, 5: v_schema,
// 7: strict}; vschema is the encoded vschema.Keyspace.
type applyVSchemaRequest struct {
	keyspace string
	vschema  []byte
	strict   bool
}

func (r applyVSchemaRequest) marshal() []byte {
	b := appendString(nil, 1, r.keyspace)
	b = appendBytes(b, 5, r.vschema)
	return appendBool(b, 7, r.strict)
}

// applyVSchemaResponse is the part of vtctldata.ApplyVSchemaResponse the client reads:
// {2: unknown_vindex_params, map vindex -> ParamList {1: params}}.
type applyVSchemaResponse struct{ unknown map[string][]string }

func (r *applyVSchemaResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 2 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		vindex, v, err := mapEntry(fl.bytes)
		if err != nil {
			return err
		}
		var params []string
		err = fields(v, func(fl field) error {
			if fl.num != 1 {
				return nil
			}
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			params = append(params, string(fl.bytes))
			return nil
		})
		if err != nil {
			return err
		}
		if r.unknown == nil {
			r.unknown = map[string][]string{}
		}
		r.unknown[vindex] = params
		return nil
	})
}

// fetchRequest is vtctldata.ExecuteFetchAsDBARequest {1: tablet_alias, 2: query,
// 3: max_rows}.
type fetchRequest struct {
	tablet  tabletAlias
	query   string
	maxRows uint64
}

func (r fetchRequest) marshal() []byte {
	b := appendBytes(nil, 1, r.tablet.marshal())
	b = appendString(b, 2, r.query)
	return appendVarint(b, 3, r.maxRows)
}

// fetchResponse is vtctldata.ExecuteFetchAsDBAResponse {1: query.QueryResult}, of which
// the client reads the rows: QueryResult {4: rows}, Row {1: lengths (packed sint64; -1 is
// NULL), 2: values, the values' bytes one after the other}. A NULL value is nil.
type fetchResponse struct{ rows [][][]byte }

func (r *fetchResponse) unmarshal(b []byte) error {
	return fields(b, func(fl field) error {
		if fl.num != 1 {
			return nil
		}
		if err := fl.want(protowire.BytesType); err != nil {
			return err
		}
		return fields(fl.bytes, func(fl field) error {
			if fl.num != 4 {
				return nil
			}
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			row, err := unmarshalRow(fl.bytes)
			if err != nil {
				return err
			}
			r.rows = append(r.rows, row)
			return nil
		})
	})
}

func unmarshalRow(b []byte) ([][]byte, error) {
	var lengths []int64
	var values []byte
	err := fields(b, func(fl field) error {
		switch fl.num {
		case 1:
			if fl.typ == protowire.VarintType { // an unpacked element
				lengths = append(lengths, protowire.DecodeZigZag(fl.varint))
				return nil
			}
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			for p := fl.bytes; len(p) > 0; {
				v, n := protowire.ConsumeVarint(p)
				if n < 0 {
					return fmt.Errorf("vtctld: malformed reply: row lengths: %w", protowire.ParseError(n))
				}
				lengths = append(lengths, protowire.DecodeZigZag(v))
				p = p[n:]
			}
		case 2:
			if err := fl.want(protowire.BytesType); err != nil {
				return err
			}
			values = fl.bytes
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	row := make([][]byte, 0, len(lengths))
	for i, n := range lengths {
		switch {
		case n == -1:
			row = append(row, nil)
		case n < -1 || n > int64(len(values)):
			return nil, fmt.Errorf("vtctld: malformed reply: value %d of a row has length %d, with %d bytes left", i, n, len(values))
		default:
			row = append(row, values[:n:n])
			values = values[n:]
		}
	}
	return row, nil
}
