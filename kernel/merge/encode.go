package merge

import (
	"math/big"
	"strconv"
	"unicode/utf8"
)

// The canonical JSON encoding of the protocol's values, requests and responses: no spaces, keys
// in a fixed order, so equal content gives equal bytes.

// appendList writes xs as a JSON array, each element written by elem.
func appendList[T any](dst []byte, xs []T, elem func([]byte, T) []byte) []byte {
	dst = append(dst, '[')
	for i, x := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = elem(dst, x)
	}
	return append(dst, ']')
}

func appendInt(dst []byte, i int) []byte       { return strconv.AppendInt(dst, int64(i), 10) }
func appendBig(dst []byte, x *big.Int) []byte  { return x.Append(dst, 10) }
func appendRow(dst []byte, row Row) []byte     { return appendList(dst, row, appendValue) }
func appendRows(dst []byte, rows []Row) []byte { return appendList(dst, rows, appendRow) }
func appendSpan(dst []byte, s Span) []byte     { return appendList(dst, []*big.Int{s.Lo, s.Hi}, appendBig) }

func appendAgg(dst []byte, a Agg) []byte {
	dst = append(dst, `{"fn":`...)
	dst = appendString(dst, a.Func.String())
	if a.Func != CountStar {
		dst = append(dst, `,"col":`...)
		dst = appendInt(dst, a.Col)
	}
	if a.Distinct {
		dst = append(dst, `,"distinct":true`...)
	}
	return append(dst, '}')
}

func appendKeyJSON(dst []byte, k Key) []byte {
	dst = append(dst, `{"col":`...)
	dst = appendInt(dst, k.Col)
	if k.Desc {
		dst = append(dst, `,"dir":"desc"`...)
	} else {
		dst = append(dst, `,"dir":"asc"`...)
	}
	switch k.Nulls {
	case NullsFirst:
		dst = append(dst, `,"nulls":"first"`...)
	case NullsLast:
		dst = append(dst, `,"nulls":"last"`...)
	}
	return append(dst, '}')
}

func appendValue(dst []byte, v Value) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		return strconv.AppendBool(dst, v.i != 0)
	case KindText:
		return appendString(dst, v.s)
	}
	return appendNumber(dst, v)
}

// appendString writes s as a JSON string the canonical way: '"' and '\' escaped, control
// characters as \b \f \n \r \t or \u00XX (lower-case hex), every other character as its UTF-8
// bytes; a byte that is not UTF-8 becomes \ufffd.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
		i++
	}
	return append(dst, '"')
}

// AppendRequest encodes a request as one canonical line (with '\n'), the inverse of
// DecodeRequest: a driver uses it to feed the same request to this package and to another
// implementation of the protocol.
func AppendRequest(dst []byte, req Request) []byte {
	dst = append(dst, `{"op":`...)
	dst = appendString(dst, req.Op())
	switch r := req.(type) {
	case *MergeRequest:
		dst = append(dst, `,"order":`...)
		dst = appendList(dst, r.Order, appendKeyJSON)
		if r.Limit.Count >= 0 {
			dst = append(dst, `,"limit":`...)
			dst = strconv.AppendInt(dst, r.Limit.Count, 10)
		}
		if r.Limit.Offset != 0 {
			dst = append(dst, `,"offset":`...)
			dst = strconv.AppendInt(dst, r.Limit.Offset, 10)
		}
		dst = append(dst, `,"shards":`...)
		dst = appendList(dst, r.Shards, appendRows)
	case *AggregateRequest:
		dst = append(dst, `,"group_by":`...)
		dst = appendList(dst, r.GroupBy, appendInt)
		dst = append(dst, `,"aggs":`...)
		dst = appendList(dst, r.Aggs, appendAgg)
		dst = append(dst, `,"input":`...)
		dst = appendString(dst, r.Input.String())
		dst = append(dst, `,"shards":`...)
		dst = appendList(dst, r.Shards, appendRows)
	case *PartitionRequest:
		if r.Modulus != nil {
			dst = append(dst, `,"modulus":`...)
			dst = appendBig(dst, r.Modulus)
			dst = append(dst, `,"parts":`...)
			dst = appendList(dst, r.Remainders, func(dst []byte, rs []*big.Int) []byte { return appendList(dst, rs, appendBig) })
			break
		}
		dst = append(dst, `,"space":`...)
		dst = appendSpan(dst, r.Space)
		dst = append(dst, `,"parts":`...)
		dst = appendList(dst, r.Parts, func(dst []byte, ss []Span) []byte { return appendList(dst, ss, appendSpan) })
	}
	return append(dst, "}\n"...)
}
