package vtctld

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// vschemaKeyspace is the JSON of vschema.Keyspace (snake_case, as kernel/render writes it
// and vtctldclient prints it), restricted to the fields this client encodes. A field it
// does not know is an error, where vtctldclient would drop it silently.
type vschemaKeyspace struct {
	Sharded                bool                     `json:"sharded"`
	Vindexes               map[string]vschemaVindex `json:"vindexes"`
	Tables                 map[string]vschemaTable  `json:"tables"`
	RequireExplicitRouting bool                     `json:"require_explicit_routing"`
}

type vschemaVindex struct {
	Type   string            `json:"type"`
	Params map[string]string `json:"params"`
	Owner  string            `json:"owner"`
}

type vschemaTable struct {
	Type                    string                `json:"type"`
	ColumnVindexes          []vschemaColumnVindex `json:"column_vindexes"`
	AutoIncrement           *vschemaAutoIncrement `json:"auto_increment"`
	Pinned                  string                `json:"pinned"`
	ColumnListAuthoritative bool                  `json:"column_list_authoritative"`
	Source                  string                `json:"source"`
}

type vschemaColumnVindex struct {
	Column  string   `json:"column"`
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
}

type vschemaAutoIncrement struct {
	Column   string `json:"column"`
	Sequence string `json:"sequence"`
}

// errVSchema marks VSchema JSON the client will not send.
var errVSchema = errors.New("the VSchema is not the JSON of vschema.Keyspace that this client encodes (sharded, vindexes{type, params, owner}, tables{type, column_vindexes{column, name, columns}, auto_increment{column, sequence}, pinned, column_list_authoritative, source}, require_explicit_routing)")

// encodeVSchema decodes VSchema JSON strictly and encodes it as vschema.Keyspace
// {1: sharded, 2: vindexes, 3: tables, 4: require_explicit_routing}.
func encodeVSchema(text []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var ks vschemaKeyspace
	if err := dec.Decode(&ks); err != nil {
		return nil, fmt.Errorf("%w: %w", errVSchema, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: text after the JSON object", errVSchema)
	}
	b := appendBool(nil, 1, ks.Sharded)
	b = appendMap(b, 2, ks.Vindexes, func(b []byte, v vschemaVindex) []byte {
		b = appendString(b, 1, v.Type)
		b = appendMap(b, 2, v.Params, func(b []byte, s string) []byte { return append(b, s...) }) // map<string, string>: the value is the string's bytes
		return appendString(b, 3, v.Owner)
	})
	b = appendMap(b, 3, ks.Tables, func(b []byte, t vschemaTable) []byte {
		b = appendString(b, 1, t.Type)
		for _, cv := range t.ColumnVindexes {
			e := appendString(nil, 1, cv.Column)
			e = appendString(e, 2, cv.Name)
			for _, c := range cv.Columns {
				e = appendBytes(e, 3, []byte(c))
			}
			b = appendBytes(b, 2, e)
		}
		if ai := t.AutoIncrement; ai != nil {
			b = appendBytes(b, 3, appendString(appendString(nil, 1, ai.Column), 2, ai.Sequence))
		}
		b = appendString(b, 5, t.Pinned)
		b = appendBool(b, 6, t.ColumnListAuthoritative)
		return appendString(b, 7, t.Source)
	})
	return appendBool(b, 4, ks.RequireExplicitRouting), nil
}
