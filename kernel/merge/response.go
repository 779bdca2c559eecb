package merge

import (
	"errors"
	"strconv"
)

// The error kinds of a response, in the order of precedence: when a line has several faults,
// the response names the kind listed first.
const (
	KindBadRequest      = "bad_request"      // the line is not a request as specified
	KindNotDecomposable = "not_decomposable" // an aggregate that partials cannot produce
	KindBadData         = "bad_data"         // a row lacks a column the query reads, SUM of text, a partial count that is not a count
	KindUnsorted        = "unsorted"         // a shard's rows are not in the ORDER BY's order
)

// Respond answers one request line, appending exactly one response line (ending in '\n') to
// dst. Every fault, including a line that is not JSON, becomes an error response.
func Respond(dst, line []byte) []byte {
	req, err := DecodeRequest(line)
	if err != nil {
		kind := KindBadRequest
		if errors.Is(err, ErrNotDecomposable) {
			kind = KindNotDecomposable
		}
		return appendError(dst, kind, err)
	}
	return respond(dst, req, 0)
}

func respond(dst []byte, req Request, mut mutation) []byte {
	switch r := req.(type) {
	case *MergeRequest:
		res, err := mergeWith(r.Shards, r.Order, r.Limit, mut)
		if err != nil {
			return appendError(dst, dataKind(err), err)
		}
		dst = append(dst, `{"ok":true,"rows":`...)
		dst = appendRows(dst, res.Rows)
		dst = append(dst, `,"from":`...)
		dst = appendList(dst, res.From, appendInt)
		dst = append(dst, `,"shard_limit":`...)
		if pl := r.Limit.perShard(mut); pl.Count >= 0 {
			dst = strconv.AppendInt(dst, pl.Count, 10)
		} else {
			dst = append(dst, "null"...)
		}
		return append(dst, "}\n"...)
	case *AggregateRequest:
		var rows []Row
		var plan *Plan
		var err error
		if r.Input == InputRows {
			rows, plan, err = aggregateWith(r.Aggregation, r.Shards, mut)
		} else if plan, err = decompose(r.Aggregation, mut); err == nil {
			rows, err = plan.Combine(r.Shards)
		}
		if err != nil {
			return appendError(dst, dataKind(err), err)
		}
		dst = append(dst, `{"ok":true,"rows":`...)
		dst = appendRows(dst, rows)
		dst = append(dst, `,"partials":`...)
		dst = appendList(dst, plan.Partials, appendAgg)
		return append(dst, "}\n"...)
	case *PartitionRequest:
		var f Finding
		var err error
		if r.Modulus != nil {
			f, err = CheckModulus(r.Modulus, r.Remainders)
		} else {
			f, err = checkPartition(r.Space, r.Parts, mut)
		}
		if err != nil {
			return appendError(dst, KindBadRequest, err)
		}
		switch {
		case f.Partition:
			return append(dst, `{"ok":true,"partition":true}`+"\n"...)
		case f.EmptyPart >= 0:
			dst = append(dst, `{"ok":true,"partition":false,"empty_part":`...)
			dst = appendInt(dst, f.EmptyPart)
			return append(dst, "}\n"...)
		}
		dst = append(dst, `{"ok":true,"partition":false,"at":`...)
		dst = appendBig(dst, f.At)
		dst = append(dst, `,"owners":`...)
		dst = appendList(dst, f.Owners, appendInt)
		return append(dst, "}\n"...)
	}
	return appendError(dst, KindBadRequest, fieldErrorf("op", "unknown request type %T", req))
}

func dataKind(err error) string {
	switch {
	case errors.Is(err, ErrNotDecomposable):
		return KindNotDecomposable
	case errors.Is(err, ErrUnsorted):
		return KindUnsorted
	}
	return KindBadData
}

func appendError(dst []byte, kind string, err error) []byte {
	field := ""
	var fe *FieldError
	var ue *UnsortedError
	var nd *NotDecomposableError
	switch {
	case errors.As(err, &fe):
		field = fe.Field
	case errors.As(err, &ue):
		field = ue.Field()
	case errors.As(err, &nd) && nd.Index >= 0:
		field = "aggs[" + strconv.Itoa(nd.Index) + "]"
	}
	dst = append(dst, `{"ok":false,"kind":`...)
	dst = appendString(dst, kind)
	dst = append(dst, `,"field":`...)
	dst = appendString(dst, field)
	dst = append(dst, `,"error":`...)
	dst = appendString(dst, err.Error())
	return append(dst, "}\n"...)
}
