package merge

import (
	"errors"
	"fmt"
)

var (
	// ErrBadInput is wrapped by every *FieldError: the input is malformed (a protocol line that is
	// not a request, a column index a row does not have, a negative OFFSET, SUM of text...).
	ErrBadInput = errors.New("merge: bad input")

	// ErrUnsorted is wrapped by *UnsortedError: a shard's rows are not in the ORDER BY's order,
	// which breaks the merge's precondition (each shard ran the query with the same ORDER BY).
	ErrUnsorted = errors.New("merge: shard rows not sorted")

	// ErrNotDecomposable is wrapped by *NotDecomposableError: an aggregate cannot be computed
	// from per-shard partial results (COUNT(DISTINCT x), string_agg, percentile_cont...).
	ErrNotDecomposable = errors.New("merge: aggregate not decomposable")
)

// FieldError says which part of the input is wrong. Field is a path in the input as the
// protocol spells it ("order[1].dir", "shards[0][3][2]", "aggs[1].fn"); it is empty when the
// whole input is at fault (a line that is not JSON).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return "merge: " + e.Msg
	}
	return "merge: " + e.Field + ": " + e.Msg
}

func (e *FieldError) Unwrap() error { return ErrBadInput }

func fieldErrorf(field, format string, a ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// atField re-homes a FieldError under path: an error about "" or "[2]" found while reading the
// value at path becomes an error about path or path+"[2]". Other errors are returned as they are.
func atField(path string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: path + fe.Field, Msg: fe.Msg}
	}
	return err
}

// UnsortedError names the first row (in shard order, then row order) that sorts before the
// row above it in its shard.
type UnsortedError struct {
	Shard, Row int
}

func (e *UnsortedError) Error() string {
	return fmt.Sprintf("merge: shards[%d][%d] sorts before shards[%d][%d] under the ORDER BY; every shard must return its rows sorted by the same ORDER BY as the merge (check the per-shard query)",
		e.Shard, e.Row, e.Shard, e.Row-1)
}

func (e *UnsortedError) Unwrap() error { return ErrUnsorted }

// Field returns the protocol path of the offending row.
func (e *UnsortedError) Field() string { return fmt.Sprintf("shards[%d][%d]", e.Shard, e.Row) }

// NotDecomposableError names an aggregate that per-shard partial results cannot produce.
type NotDecomposableError struct {
	Index  int    // position in the aggregate list, -1 when not known
	Agg    string // as SQL names it: "count(distinct)", "string_agg"
	Reason string
}

func (e *NotDecomposableError) Error() string {
	where := ""
	if e.Index >= 0 {
		where = fmt.Sprintf("aggs[%d]: ", e.Index)
	}
	return fmt.Sprintf("merge: %s%s is not decomposable: %s; run it on one node or rewrite the query", where, e.Agg, e.Reason)
}

func (e *NotDecomposableError) Unwrap() error { return ErrNotDecomposable }
