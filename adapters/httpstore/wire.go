package httpstore

import (
	"encoding/json"
	"fmt"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// The operations, each a POST to /v1/<op>.
const (
	opRead   = "read"
	opCAS    = "cas"
	opWatch  = "watch"
	opGet    = "get"
	opPut    = "put"
	opDelete = "delete"
	opList   = "list"
)

// request is the body of every call; each op reads the fields it needs.
type request struct {
	Namespace string `json:"namespace,omitempty"`
	Database  string `json:"database,omitempty"`
	Expect    uint64 `json:"expect,omitempty"`
	Record    []byte `json:"record,omitempty"` // shardmap binary encoding
	After     uint64 `json:"after,omitempty"`
	WaitMS    int64  `json:"wait_ms,omitempty"`
	Key       string `json:"key,omitempty"`
	Data      []byte `json:"data,omitempty"`
	Prefix    string `json:"prefix,omitempty"`
	// After and Limit page a list: the blobs whose keys sort after After, at most Limit
	// (the server's page size caps it).
	ListAfter string `json:"list_after,omitempty"`
	// Desc lists newest-first: keys in descending order, those before ListAfter.
	Desc  bool `json:"desc,omitempty"`
	Limit int  `json:"limit,omitempty"`
}

// response is the body of every answer. Error is set exactly when the call failed.
type response struct {
	Record  []byte     `json:"record,omitempty"`
	Version uint64     `json:"version,omitempty"`
	Blob    *wireBlob  `json:"blob,omitempty"`
	Blobs   []wireBlob `json:"blobs,omitempty"`
	// Pending: a watch waited its whole time without a newer record; ask again.
	Pending bool `json:"pending,omitempty"`
	// More: a list page that is not the last; ask again after its last key.
	More  bool       `json:"more,omitempty"`
	Error *wireError `json:"error,omitempty"`
}

type wireBlob struct {
	Key     string `json:"key"`
	Version uint64 `json:"version"`
	Data    []byte `json:"data"`
}

// Error kinds: how an error crosses the wire so the client can rebuild what errors.Is and
// errors.As find on the server's side.
const (
	kindNotFound     = "not_found"
	kindConflict     = "conflict"      // ConflictError; Current holds the record (or nothing)
	kindBlobConflict = "blob_conflict" // BlobConflictError
	kindInvalid      = "invalid"       // shardmap.ErrInvalid
	kindClosed       = "closed"
	kindCorrupt      = "corrupt"
	kindBadRequest   = "bad_request" // the request itself was malformed
	// Refusals before the call ran (see ErrUnauthenticated and the others).
	kindUnauthenticated = "unauthenticated"
	kindForbidden       = "forbidden"
	kindTooLarge        = "too_large"
	kindBusy            = "busy"
	kindOther           = "other"
)

type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// ConflictError and BlobConflictError fields.
	Expected uint64 `json:"expected,omitempty"`
	Current  []byte `json:"current,omitempty"` // record, binary encoding
	Version  uint64 `json:"current_version,omitempty"`
	Key      string `json:"key,omitempty"`
}

// remoteError is an error the server reported, keeping its message and the sentinel it
// matched there.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Is(target error) bool { return e.is != nil && target == e.is }

// decodeResponse parses an answer body. It is the one decoder of untrusted bytes on the
// client side (FuzzDecodeResponse).
func decodeResponse(body []byte) (*response, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("httpstore: the server's answer is not JSON: %w", err)
	}
	return &r, nil
}

// decodeRequest parses a request body: the one decoder of untrusted bytes on the server's
// side (FuzzDecodeRequest).
func decodeRequest(body []byte) (*request, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("httpstore: request is not JSON: %w", err)
	}
	if r.Limit < 0 || r.WaitMS < 0 {
		return nil, fmt.Errorf("httpstore: request has a negative limit (%d) or wait_ms (%d)", r.Limit, r.WaitMS)
	}
	return &r, nil
}

// asError turns a wire error back into the error value the store returned.
func (w *wireError) asError(db adapters.DBRef) error {
	switch w.Kind {
	case kindNotFound:
		return adapters.ErrNotFound
	case kindConflict:
		var cur *shardmap.Record
		if len(w.Current) > 0 {
			r, err := shardmap.Decode(w.Current)
			if err != nil {
				return fmt.Errorf("httpstore: %s: the conflict's current record does not decode: %w: %v", db, adapters.ErrCorrupt, err)
			}
			cur = r
		}
		return &adapters.ConflictError{DB: db, Expected: w.Expected, Current: cur}
	case kindBlobConflict:
		return &adapters.BlobConflictError{Key: w.Key, Expected: w.Expected, Current: w.Version}
	case kindInvalid:
		return &remoteError{msg: w.Message, is: shardmap.ErrInvalid}
	case kindClosed:
		return &remoteError{msg: w.Message, is: adapters.ErrClosed}
	case kindCorrupt:
		return &remoteError{msg: w.Message, is: adapters.ErrCorrupt}
	case kindUnauthenticated:
		return &remoteError{msg: w.Message, is: ErrUnauthenticated}
	case kindForbidden:
		return &remoteError{msg: w.Message, is: ErrForbidden}
	case kindTooLarge:
		return &remoteError{msg: w.Message, is: ErrTooLarge}
	case kindBusy:
		return &remoteError{msg: w.Message, is: ErrBusy}
	}
	return &remoteError{msg: w.Message}
}
