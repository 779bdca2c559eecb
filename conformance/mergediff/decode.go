package mergediff

import (
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"loam.dev/router/kernel/merge"
)

// Type OIDs of the values the stream's queries return.
const (
	oidBool    = 16
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidVarchar = 1043
	oidNumeric = 1700
)

// Decode reads one value Postgres sent in text format (nil is NULL) for a column of type oid.
func Decode(oid uint32, raw []byte) (merge.Value, error) {
	if raw == nil {
		return merge.Null(), nil
	}
	s := string(raw)
	switch oid {
	case oidBool:
		switch s {
		case "t":
			return merge.Bool(true), nil
		case "f":
			return merge.Bool(false), nil
		}
		return merge.Value{}, fmt.Errorf("mergediff: boolean %q is neither t nor f", s)
	case oidInt2, oidInt4, oidInt8:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return merge.Value{}, fmt.Errorf("mergediff: integer %q: %w", s, err)
		}
		return merge.Int(v), nil
	case oidNumeric:
		v, err := merge.ParseDecimal(s)
		if err != nil {
			return merge.Value{}, fmt.Errorf("mergediff: numeric %q: %w", s, err)
		}
		return v, nil
	case oidText, oidVarchar:
		return merge.Text(s), nil
	}
	return merge.Value{}, fmt.Errorf("mergediff: no decoding for type oid %d (value %q)", oid, s)
}

// DecodeRow reads a row of text-format values with their field descriptions.
func DecodeRow(fields []pgconn.FieldDescription, raw [][]byte) (merge.Row, error) {
	if len(fields) != len(raw) {
		return nil, fmt.Errorf("mergediff: %d values for %d fields", len(raw), len(fields))
	}
	row := make(merge.Row, len(raw))
	for i, f := range fields {
		v, err := Decode(f.DataTypeOID, raw[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		row[i] = v
	}
	return row, nil
}
