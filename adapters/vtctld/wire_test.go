package vtctld

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

func tagged(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return protowire.AppendTag(b, num, typ)
}

// TestDecodeSkipsWhatItDoesNotRead: a tablet with every kind of field the client does not
// read (a map, a fixed32, a fixed64, a nested message) decodes to the fields it does, as a
// generated decoder would.
func TestDecodeSkipsWhatItDoesNotRead(t *testing.T) {
	alias := appendVarint(appendString(nil, 1, "zone1"), 2, 101)
	tab := appendBytes(nil, 1, alias)
	tab = appendString(tab, 2, "host")                                              // hostname
	tab = appendBytes(tab, 4, appendVarint(appendString(nil, 1, "grpc"), 2, 15999)) // port_map entry
	tab = appendString(tab, 5, "customer")
	tab = appendString(tab, 6, "-80")
	tab = protowire.AppendFixed32(tagged(tab, 99, protowire.Fixed32Type), 7)
	tab = protowire.AppendFixed64(tagged(tab, 98, protowire.Fixed64Type), 7)
	tab = appendVarint(tab, 8, 2)
	tab = appendString(tab, 12, "10.0.0.7") // mysql_hostname
	tab = appendVarint(tab, 13, 17100)      // mysql_port
	tab = appendString(tab, 9, "shop")      // db_name_override
	resp := appendBytes(nil, 1, tab)
	resp = appendBytes(resp, 1, appendBytes(nil, 1, appendString(nil, 1, "zone2")))
	var got getTabletsResponse
	require.NoError(t, got.unmarshal(resp))
	require.Equal(t, []tabletRecord{
		{alias: tabletAlias{cell: "zone1", uid: 101}, keyspace: "customer", shard: "-80", typ: 2, mysqlHost: "10.0.0.7", mysqlPort: 17100, dbName: "shop"},
		{alias: tabletAlias{cell: "zone2"}},
	}, got.tablets)
}

// TestDecodeRefusesWrongWireType: a known field with another wire type than its
// declaration's is an error naming the field, not a misread.
func TestDecodeRefusesWrongWireType(t *testing.T) {
	var got getTabletsResponse
	err := got.unmarshal(appendBytes(nil, 1, appendVarint(nil, 5, 3)))
	require.ErrorContains(t, err, "field 5 has wire type 0, want 2")
	var a tabletAlias
	require.ErrorContains(t, a.unmarshal(appendVarint(nil, 2, 1<<32)), "does not fit 32 bits")
	require.ErrorContains(t, a.unmarshal([]byte{0x0a, 0x05, 'a'}), "malformed reply")
}

// TestSrvKeyspaceDecode: partitions, shard references with and without key ranges, and the
// cell map.
func TestSrvKeyspaceDecode(t *testing.T) {
	ref := func(name string, kr []byte) []byte {
		b := appendString(nil, 1, name)
		if kr != nil {
			b = appendBytes(b, 2, kr)
		}
		return b
	}
	part := appendVarint(nil, 1, 1)
	part = appendBytes(part, 2, ref("-80", appendBytes(nil, 2, []byte{0x80})))
	part = appendBytes(part, 2, ref("80-", appendBytes(nil, 1, []byte{0x80})))
	part = appendBytes(part, 2, ref("0", nil))
	srv := appendBytes(nil, 1, part)
	entry := appendBytes(appendString(nil, 1, "zone1"), 2, srv)
	var got srvKeyspacesResponse
	require.NoError(t, got.unmarshal(appendBytes(nil, 1, entry)))
	require.Equal(t, map[string]*srvKeyspace{"zone1": {partitions: []partition{{servedType: 1, refs: []shardReference{
		{name: "-80", keyRange: &keyRange{end: []byte{0x80}}},
		{name: "80-", keyRange: &keyRange{start: []byte{0x80}}},
		{name: "0"},
	}}}}}, got.byCell)
}

// TestEncodeVSchemaIsDeterministic: maps are encoded in key order, so the same VSchema in
// another key order encodes to the same bytes; the encoding parses field by field.
func TestEncodeVSchemaIsDeterministic(t *testing.T) {
	a, err := encodeVSchema([]byte(`{"sharded": true, "vindexes": {"a": {"type": "hash"}, "b": {"type": "xxhash"}}, "tables": {"t": {"column_vindexes": [{"column": "id", "name": "a"}]}}}`))
	require.NoError(t, err)
	b, err := encodeVSchema([]byte(`{"tables": {"t": {"column_vindexes": [{"name": "a", "column": "id"}]}}, "vindexes": {"b": {"type": "xxhash"}, "a": {"type": "hash"}}, "sharded": true}`))
	require.NoError(t, err)
	require.Equal(t, a, b)
	var nums []protowire.Number
	require.NoError(t, fields(a, func(fl field) error { nums = append(nums, fl.num); return nil }))
	require.Equal(t, []protowire.Number{1, 2, 2, 3}, nums)

	for _, bad := range []string{`{"sharded": true, "shardd": 1}`, `{"tables": {"t": {"columns": [{"name": "c"}]}}}`, `{} {}`, `[]`, ``} {
		_, err := encodeVSchema([]byte(bad))
		require.ErrorIs(t, err, errVSchema, bad)
	}
}

// TestFetchDecode: a QueryResult's rows, with packed and unpacked lengths, NULL (-1), and
// a length past the values refused as malformed.
func TestFetchDecode(t *testing.T) {
	lengths := func(ls ...int64) []byte {
		var p []byte
		for _, l := range ls {
			p = protowire.AppendVarint(p, protowire.EncodeZigZag(l))
		}
		return appendBytes(nil, 1, p)
	}
	row1 := append(lengths(1, -1, 3), appendBytes(nil, 2, []byte("0abc"))...)
	row2 := protowire.AppendVarint(tagged(nil, 1, protowire.VarintType), protowire.EncodeZigZag(2))
	row2 = appendBytes(row2, 2, []byte("ON"))
	qr := appendBytes(appendBytes(appendVarint(nil, 2, 0), 4, row1), 4, row2)
	var got fetchResponse
	require.NoError(t, got.unmarshal(appendBytes(nil, 1, qr)))
	require.Equal(t, [][][]byte{{[]byte("0"), nil, []byte("abc")}, {[]byte("ON")}}, got.rows)

	bad := appendBytes(nil, 1, appendBytes(nil, 4, append(lengths(5), appendBytes(nil, 2, []byte("ab"))...)))
	require.ErrorContains(t, (&fetchResponse{}).unmarshal(bad), "malformed reply: value 0 of a row has length 5")
	require.Equal(t, []byte{0x0a, 0x07, 0x0a, 0x05, 'z', 'o', 'n', 'e', '1', 0x12, 0x19}[:9], fetchRequest{tablet: tabletAlias{cell: "zone1"}, query: "SELECT @@global.read_only", maxRows: 1}.marshal()[:9])
}

// FuzzReplies: no input makes a decoder panic, and every refusal says the reply is
// malformed.
func FuzzReplies(f *testing.F) {
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01})
	f.Add(appendBytes(nil, 1, appendBytes(appendString(nil, 1, "zone1"), 2, appendBytes(nil, 1, appendVarint(nil, 1, 1)))))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range []reply{&getTabletsResponse{}, &reparentResponse{}, &srvKeyspacesResponse{}, &applyVSchemaResponse{}, &tabletAlias{}, &fetchResponse{}, &getWorkflowsResponse{}, &workflowStatusResponse{}, &vdiffShowResponse{}, &getShardResponse{}, &getVSchemaResponse{}, &ignored{}} {
			if err := r.unmarshal(b); err != nil && !strings.HasPrefix(err.Error(), "vtctld: malformed reply") {
				t.Fatalf("%T: %v", r, err)
			}
		}
	})
}

// FuzzEncodeVSchema: JSON is either refused as not a VSchema, or encoded to a message that
// parses.
func FuzzEncodeVSchema(f *testing.F) {
	f.Add([]byte(`{"sharded": true, "vindexes": {"h": {"type": "hash", "params": {"a": "b"}}}, "tables": {"t": {"column_vindexes": [{"column": "id", "name": "h"}], "auto_increment": {"column": "id", "sequence": "s"}}}}`))
	f.Add([]byte(`{"shardd": 1}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		b, err := encodeVSchema(text)
		if err != nil {
			require.ErrorIs(t, err, errVSchema)
			return
		}
		require.NoError(t, fields(b, func(field) error { return nil }))
	})
}

// TestEncodeVSchemaParams: a vindex's params (map<string, string>) carry the value's bytes
// as field 2 of the entry, as a generated encoder writes them.
func TestEncodeVSchemaParams(t *testing.T) {
	b, err := encodeVSchema([]byte(`{"vindexes": {"l": {"type": "lookup", "params": {"table": "l_idx"}}}}`))
	require.NoError(t, err)
	var vindex []byte
	require.NoError(t, fields(b, func(fl field) error {
		if fl.num == 2 {
			k, v, err := mapEntry(fl.bytes)
			require.Equal(t, "l", k)
			vindex = v
			return err
		}
		return nil
	}))
	params := map[string]string{}
	require.NoError(t, fields(vindex, func(fl field) error {
		if fl.num == 2 {
			k, v, err := mapEntry(fl.bytes)
			params[k] = string(v)
			return err
		}
		return nil
	}))
	require.Equal(t, map[string]string{"table": "l_idx"}, params)
}
