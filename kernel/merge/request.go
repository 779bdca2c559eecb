package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The requests of the oracle's JSON-lines protocol (§12.2 of the design) and their decoder.
// The package documentation specifies the protocol with examples.

// Request is one decoded protocol line: a *MergeRequest, *AggregateRequest or *PartitionRequest.
type Request interface{ Op() string }

// MergeRequest is {"op":"merge",...}: merge the shards' sorted rows.
type MergeRequest struct {
	Order  OrderBy
	Limit  Limit
	Shards [][]Row
}

// Input says what an AggregateRequest's shards hold.
type Input uint8

const (
	// InputRows: the shards hold raw rows; each shard's partials are computed (Plan.ShardRows)
	// and then combined.
	InputRows Input = iota + 1
	// InputPartials: the shards hold what the per-shard query returned (group columns, then the
	// plan's partials), as a real shard would answer.
	InputPartials
)

func (in Input) String() string {
	switch in {
	case InputRows:
		return "rows"
	case InputPartials:
		return "partials"
	}
	return "Input(" + strconv.Itoa(int(in)) + ")"
}

// AggregateRequest is {"op":"aggregate",...}.
type AggregateRequest struct {
	Aggregation
	Input  Input
	Shards [][]Row
}

// PartitionRequest is {"op":"partition_check",...} in one of its two forms: Space and Parts
// (ranges), or Modulus and Remainders (hash sharding).
type PartitionRequest struct {
	Space      Span
	Parts      [][]Span
	Modulus    *big.Int
	Remainders [][]*big.Int
}

func (*MergeRequest) Op() string     { return "merge" }
func (*AggregateRequest) Op() string { return "aggregate" }
func (*PartitionRequest) Op() string { return "partition_check" }

// DecodeRequest decodes one request line (trailing newline and surrounding whitespace allowed).
// It never panics. A malformed line returns a *FieldError naming the field at fault; a request
// naming an aggregate Postgres has but that cannot be decomposed returns a
// *NotDecomposableError, but only when the rest of the line is well formed.
func DecodeRequest(line []byte) (Request, error) {
	d := &decoder{}
	req, err := d.request(line)
	if err != nil {
		return nil, err
	}
	if d.refused != nil {
		return nil, d.refused
	}
	return req, nil
}

type decoder struct {
	refused *NotDecomposableError // the first aggregate refused, reported if nothing else is wrong
}

type member struct {
	key string
	raw json.RawMessage
}

// object reads a JSON object, refusing duplicate keys and keys not in allowed.
func object(raw []byte, path string, allowed ...string) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fieldErrorf(path, "not JSON: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, fieldErrorf(path, "must be an object, not %s", jsonType(raw))
	}
	var out []member
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fieldErrorf(path, "not JSON: %v", err)
		}
		key, _ := kt.(string)
		at := key
		if path != "" {
			at = path + "." + key
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fieldErrorf(at, "not JSON: %v", err)
		}
		for _, m := range out {
			if m.key == key {
				return nil, fieldErrorf(at, "appears twice")
			}
		}
		known := false
		for _, a := range allowed {
			known = known || a == key
		}
		if !known {
			return nil, fieldErrorf(at, "unknown field (allowed here: %s)", strings.Join(allowed, ", "))
		}
		out = append(out, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fieldErrorf(path, "not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fieldErrorf(path, "unexpected data after the object")
	}
	return out, nil
}

func get(ms []member, key string) json.RawMessage {
	for _, m := range ms {
		if m.key == key {
			return m.raw
		}
	}
	return nil
}

func jsonType(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw json.RawMessage) bool { return raw == nil || string(bytes.TrimSpace(raw)) == "null" }

// array splits a JSON array into its elements.
func array(raw json.RawMessage, path string) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fieldErrorf(path, "must be an array, not %s", jsonType(raw))
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fieldErrorf(path, "not JSON: %v", err)
	}
	return out, nil
}

// maxIntegerDigits bounds the integers of columns, limits and ranges; 2^64, the largest key a
// range needs, has 20 digits.
const maxIntegerDigits = 1000

// integer reads a JSON integer literal (no fraction, no exponent) of up to 1000 characters.
func integer(raw json.RawMessage, path string) (*big.Int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return nil, fieldErrorf(path, "must be an integer, not %s", jsonType(raw))
	}
	if len(raw) > maxIntegerDigits {
		return nil, fieldErrorf(path, "an integer of %d characters is longer than the %d this protocol reads", len(raw), maxIntegerDigits)
	}
	x, ok := new(big.Int).SetString(string(raw), 10)
	if !ok {
		return nil, fieldErrorf(path, "%s is not an integer (no fraction or exponent)", raw)
	}
	return x, nil
}

func int64In(raw json.RawMessage, path string, lo, hi int64) (int64, error) {
	x, err := integer(raw, path)
	if err != nil {
		return 0, err
	}
	if !x.IsInt64() || x.Int64() < lo || x.Int64() > hi {
		return 0, fieldErrorf(path, "%s is outside %d..%d", x, lo, hi)
	}
	return x.Int64(), nil
}

func column(raw json.RawMessage, path string) (int, error) {
	n, err := int64In(raw, path, 0, math.MaxInt32)
	return int(n), err
}

func str(raw json.RawMessage, path string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", fieldErrorf(path, "must be a string, not %s", jsonType(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fieldErrorf(path, "not JSON: %v", err)
	}
	return s, nil
}

// value reads one SQL value: null, true/false, a number literal (exact; its digits after the
// point are its display scale) or a string.
func value(raw json.RawMessage, path string) (Value, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return Value{}, fieldErrorf(path, "missing value")
	case raw[0] == 'n':
		return Value{}, nil
	case raw[0] == 't':
		return Bool(true), nil
	case raw[0] == 'f':
		return Bool(false), nil
	case raw[0] == '"':
		s, err := str(raw, path)
		return Text(s), err
	case raw[0] == '[' || raw[0] == '{':
		return Value{}, fieldErrorf(path, "a value must be null, a boolean, a number or a string, not %s", jsonType(raw))
	}
	v, err := ParseDecimal(string(raw))
	if err != nil {
		return Value{}, atField(path, err)
	}
	return v, nil
}

// shards reads [[row, ...], ...] with each row [value, ...].
func shardRows(raw json.RawMessage, path string) ([][]Row, error) {
	ss, err := array(raw, path)
	if err != nil {
		return nil, err
	}
	out := make([][]Row, len(ss))
	for s, sraw := range ss {
		spath := path + "[" + strconv.Itoa(s) + "]"
		rs, err := array(sraw, spath)
		if err != nil {
			return nil, err
		}
		out[s] = make([]Row, len(rs))
		for r, rraw := range rs {
			rpath := spath + "[" + strconv.Itoa(r) + "]"
			vs, err := array(rraw, rpath)
			if err != nil {
				return nil, err
			}
			row := make(Row, len(vs))
			for c, vraw := range vs {
				if row[c], err = value(vraw, rpath+"["+strconv.Itoa(c)+"]"); err != nil {
					return nil, err
				}
			}
			out[s][r] = row
		}
	}
	return out, nil
}

func (d *decoder) request(line []byte) (Request, error) {
	ms, err := object(line, "", "op", "order", "limit", "offset", "shards", "group_by", "aggs", "input", "space", "parts", "modulus")
	if err != nil {
		return nil, err
	}
	opRaw := get(ms, "op")
	if opRaw == nil {
		return nil, fieldErrorf("op", "missing (merge, aggregate or partition_check)")
	}
	op, err := str(opRaw, "op")
	if err != nil {
		return nil, err
	}
	allowed := map[string][]string{
		"merge":           {"op", "order", "limit", "offset", "shards"},
		"aggregate":       {"op", "group_by", "aggs", "input", "shards"},
		"partition_check": {"op", "space", "parts", "modulus"},
	}[op]
	if allowed == nil {
		return nil, fieldErrorf("op", "%q is not merge, aggregate or partition_check", op)
	}
	for _, m := range ms {
		ok := false
		for _, a := range allowed {
			ok = ok || a == m.key
		}
		if !ok {
			return nil, fieldErrorf(m.key, "unknown field for op %q (allowed: %s)", op, strings.Join(allowed, ", "))
		}
	}
	switch op {
	case "merge":
		return d.merge(ms)
	case "aggregate":
		return d.aggregate(ms)
	}
	return d.partition(ms)
}

func required(ms []member, key string) (json.RawMessage, error) {
	raw := get(ms, key)
	if raw == nil {
		return nil, fieldErrorf(key, "missing")
	}
	return raw, nil
}

func requiredShards(ms []member) ([][]Row, error) {
	raw, err := required(ms, "shards")
	if err != nil {
		return nil, err
	}
	return shardRows(raw, "shards")
}

func (d *decoder) merge(ms []member) (Request, error) {
	req := &MergeRequest{Limit: Limit{Count: All}}
	raw, err := required(ms, "order")
	if err != nil {
		return nil, err
	}
	keys, err := array(raw, "order")
	if err != nil {
		return nil, err
	}
	req.Order = make(OrderBy, len(keys))
	for i, kraw := range keys {
		at := "order[" + strconv.Itoa(i) + "]"
		km, err := object(kraw, at, "col", "dir", "nulls")
		if err != nil {
			return nil, err
		}
		craw := get(km, "col")
		if craw == nil {
			return nil, fieldErrorf(at+".col", "missing")
		}
		if req.Order[i].Col, err = column(craw, at+".col"); err != nil {
			return nil, err
		}
		if raw := get(km, "dir"); raw != nil {
			dir, err := str(raw, at+".dir")
			if err != nil {
				return nil, err
			}
			switch dir {
			case "asc":
			case "desc":
				req.Order[i].Desc = true
			default:
				return nil, fieldErrorf(at+".dir", "%q is not asc or desc", dir)
			}
		}
		if raw := get(km, "nulls"); raw != nil {
			nulls, err := str(raw, at+".nulls")
			if err != nil {
				return nil, err
			}
			switch nulls {
			case "first":
				req.Order[i].Nulls = NullsFirst
			case "last":
				req.Order[i].Nulls = NullsLast
			default:
				return nil, fieldErrorf(at+".nulls", "%q is not first or last (leave it out for Postgres's default)", nulls)
			}
		}
	}
	if raw := get(ms, "limit"); !isNull(raw) {
		if req.Limit.Count, err = int64In(raw, "limit", 0, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	if raw := get(ms, "offset"); raw != nil {
		if req.Limit.Offset, err = int64In(raw, "offset", 0, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	if req.Shards, err = requiredShards(ms); err != nil {
		return nil, err
	}
	return req, nil
}

func (d *decoder) aggregate(ms []member) (Request, error) {
	req := &AggregateRequest{}
	if raw := get(ms, "group_by"); raw != nil {
		cols, err := array(raw, "group_by")
		if err != nil {
			return nil, err
		}
		req.GroupBy = make([]int, len(cols))
		for i, c := range cols {
			if req.GroupBy[i], err = column(c, "group_by["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
	}
	raw, err := required(ms, "aggs")
	if err != nil {
		return nil, err
	}
	aggs, err := array(raw, "aggs")
	if err != nil {
		return nil, err
	}
	for i, araw := range aggs {
		at := "aggs[" + strconv.Itoa(i) + "]"
		am, err := object(araw, at, "fn", "col", "distinct")
		if err != nil {
			return nil, err
		}
		fraw := get(am, "fn")
		if fraw == nil {
			return nil, fieldErrorf(at+".fn", "missing")
		}
		name, err := str(fraw, at+".fn")
		if err != nil {
			return nil, err
		}
		var ag Agg
		ag.Func, err = ParseFunc(name)
		var nd *NotDecomposableError
		switch {
		case errors.As(err, &nd):
			if d.refused == nil {
				d.refused = &NotDecomposableError{Index: i, Agg: nd.Agg, Reason: nd.Reason}
			}
		case err != nil:
			return nil, atField(at+".fn", err)
		}
		if raw := get(am, "col"); !isNull(raw) {
			if ag.Col, err = column(raw, at+".col"); err != nil {
				return nil, err
			}
		} else if ag.Func == Count {
			ag.Func = CountStar
		} else if ag.Func != 0 {
			return nil, fieldErrorf(at+".col", "missing (only count may leave it out, for count(*))")
		}
		if raw := get(am, "distinct"); raw != nil {
			switch string(bytes.TrimSpace(raw)) {
			case "true":
				ag.Distinct = true
			case "false":
			default:
				return nil, fieldErrorf(at+".distinct", "must be true or false, not %s", jsonType(raw))
			}
			if ag.Distinct && ag.Func == CountStar {
				return nil, fieldErrorf(at+".distinct", "count(distinct *) is not SQL; give count a column")
			}
		}
		req.Aggs = append(req.Aggs, ag)
	}
	if raw, err = required(ms, "input"); err != nil {
		return nil, err
	}
	in, err := str(raw, "input")
	if err != nil {
		return nil, err
	}
	switch in {
	case "rows":
		req.Input = InputRows
	case "partials":
		req.Input = InputPartials
	default:
		return nil, fieldErrorf("input", "%q is not rows or partials", in)
	}
	if req.Shards, err = requiredShards(ms); err != nil {
		return nil, err
	}
	return req, nil
}

func (d *decoder) partition(ms []member) (Request, error) {
	req := &PartitionRequest{}
	sraw, mraw := get(ms, "space"), get(ms, "modulus")
	if (sraw == nil) == (mraw == nil) {
		return nil, fieldErrorf("space", "give exactly one of space (ranges) and modulus (remainders)")
	}
	praw, err := required(ms, "parts")
	if err != nil {
		return nil, err
	}
	parts, err := array(praw, "parts")
	if err != nil {
		return nil, err
	}
	if mraw != nil {
		if req.Modulus, err = integer(mraw, "modulus"); err != nil {
			return nil, err
		}
		if req.Modulus.Sign() <= 0 {
			return nil, fieldErrorf("modulus", "%s is not a positive integer", req.Modulus)
		}
		req.Remainders = make([][]*big.Int, len(parts))
		for i, p := range parts {
			rs, err := array(p, "parts["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			req.Remainders[i] = make([]*big.Int, len(rs))
			for j, r := range rs {
				if req.Remainders[i][j], err = integer(r, "parts["+strconv.Itoa(i)+"]["+strconv.Itoa(j)+"]"); err != nil {
					return nil, err
				}
			}
		}
		return req, nil
	}
	if req.Space, err = spanValue(sraw, "space"); err != nil {
		return nil, err
	}
	req.Parts = make([][]Span, len(parts))
	for i, p := range parts {
		rs, err := array(p, "parts["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		req.Parts[i] = make([]Span, len(rs))
		for j, r := range rs {
			if req.Parts[i][j], err = spanValue(r, "parts["+strconv.Itoa(i)+"]["+strconv.Itoa(j)+"]"); err != nil {
				return nil, err
			}
		}
	}
	return req, nil
}

func spanValue(raw json.RawMessage, path string) (Span, error) {
	ends, err := array(raw, path)
	if err != nil {
		return Span{}, err
	}
	if len(ends) != 2 {
		return Span{}, fieldErrorf(path, "a range is [lo, hi], two integers, not %d values", len(ends))
	}
	lo, err := integer(ends[0], path+"[0]")
	if err != nil {
		return Span{}, err
	}
	hi, err := integer(ends[1], path+"[1]")
	if err != nil {
		return Span{}, err
	}
	if lo.Cmp(hi) >= 0 {
		return Span{}, fieldErrorf(path, "[%s, %s) is empty: a range [lo, hi) needs lo < hi", lo, hi)
	}
	return Span{Lo: lo, Hi: hi}, nil
}
