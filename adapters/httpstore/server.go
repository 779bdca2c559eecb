package httpstore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Store is what the server serves and the client implements: records and blobs.
type Store interface {
	adapters.ShardMapStore
	adapters.BlobStore
}

// Options configure a server or a client.
type Options struct {
	// Token is the client's credential, sent as "Authorization: Bearer <Token>".
	Token string
	// Credentials are what a server accepts; a server with none refuses every call.
	Credentials []Credential
	// Local, when set, is the identity of every caller, with no credential asked: for a
	// Unix socket only its owner can open (mode 0600), on which the kernel vouches for the
	// caller. Never set it on a TCP listener.
	Local *Identity
	// Authorize, when set, decides whether the caller may make a call the server was asked
	// (nil allows every authenticated call). It may rewrite a.Data (the server stamps an
	// audit entry with the caller's identity); an error refuses the call with
	// ErrForbidden and the error's text.
	Authorize func(id Identity, a *Access) error
	// Hosts are the Host header values a server accepts (a DNS-rebinding defence; see
	// LoopbackHosts). Empty accepts any.
	Hosts []string
	// MaxBody bounds a request body (default DefaultMaxBody).
	MaxBody int64
	// MaxConcurrent caps the calls a server runs at once (default 64); a call over the cap
	// is answered at once with ErrBusy (HTTP 503) rather than queued.
	MaxConcurrent int
	// PageSize caps the blobs of one list answer (default 256); the client asks for the
	// next page until the listing is complete.
	PageSize int
	// MaxResponse bounds an answer the client reads (default DefaultMaxResponse); a larger
	// one is an error wrapping ErrTooLarge.
	MaxResponse int64
	// CallTimeout bounds every client call whose context has no earlier deadline (default
	// 10s; a watch gets WatchWait on top), so a server that accepts and never answers
	// cannot hold a caller.
	CallTimeout time.Duration
	// ReadTimeout bounds how long a server (NewServer) reads one request, headers and body
	// (default 10s): a client that sends its body a byte at a time is cut off.
	ReadTimeout time.Duration
	// WatchWait bounds how long the server holds one watch call before answering
	// "pending" (default 20s). The client sends its own wish; the server takes the smaller.
	WatchWait time.Duration
	// HTTPClient is the client's transport (default: a client with dial, TLS-handshake and
	// header timeouts, and TLSConfig when set).
	HTTPClient *http.Client
	// TLSConfig is the client's TLS configuration for https:// URLs (see ClientTLS).
	TLSConfig *tls.Config
}

// Access is one call the server was asked to make, as Authorize sees it.
type Access struct {
	Op     string // read, cas, watch (records); get, put, delete, list (blobs)
	DB     adapters.DBRef
	Key    string // the blob's key, or the list's prefix
	Expect uint64 // the version a cas, put or delete expects (0: create)
	Data   []byte // a put's data
}

// Write reports whether the call changes the store.
func (a *Access) Write() bool { return a.Op == opCAS || a.Op == opPut || a.Op == opDelete }

const (
	defaultWatchWait     = 20 * time.Second
	defaultMaxConcurrent = 64
	defaultPageSize      = 256
	defaultCallTimeout   = 10 * time.Second
	defaultReadTimeout   = 10 * time.Second
	// DefaultMaxBody bounds a request: 1 MiB. The largest legitimate request is a CAS of a
	// 256-shard record: 6 KB encoded with short host names, 12 KB with 35-character ones,
	// 16 KB as base64 in the JSON request (TestLargestRequestsFit); machine snapshots are
	// smaller. 1 MiB leaves a margin of 64 for longer names and growth, while a caller
	// cannot make the server hold more than 1 MiB per call (and MaxConcurrent calls).
	DefaultMaxBody = 1 << 20
	// DefaultMaxResponse bounds an answer: 8 MiB, a full page of the largest blobs.
	DefaultMaxResponse = 8 << 20
	// pageBytes bounds the data of one list page, below DefaultMaxResponse with room for
	// the JSON framing (base64 grows data by 4/3).
	pageBytes  = 4 << 20
	pathPrefix = "/v1/"
)

// Handler serves s at /v1/<op>. Mount it at the root of a server (or strip a prefix).
// Every call must pass the browser defences (no Origin header, a Host of opts.Hosts,
// Content-Type: application/json), carry a credential of opts.Credentials, and be allowed
// by opts.Authorize.
func Handler(s Store, opts *Options) http.Handler {
	h := &handler{s: s, wait: defaultWatchWait, auth: newAuthenticator(opts), maxBody: DefaultMaxBody, page: defaultPageSize}
	conc := defaultMaxConcurrent
	if opts != nil {
		h.authorize = opts.Authorize
		if opts.WatchWait > 0 {
			h.wait = opts.WatchWait
		}
		if opts.MaxBody > 0 {
			h.maxBody = opts.MaxBody
		}
		if opts.MaxConcurrent > 0 {
			conc = opts.MaxConcurrent
		}
		if opts.PageSize > 0 {
			h.page = opts.PageSize
		}
	}
	h.slots = make(chan struct{}, conc)
	return h
}

type handler struct {
	s         Store
	auth      *authenticator
	authorize func(Identity, *Access) error
	wait      time.Duration
	maxBody   int64
	page      int
	slots     chan struct{}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeRefusal(w, &refusal{http.StatusMethodNotAllowed, kindBadRequest, "httpstore: every call is a POST"})
		return
	}
	id, ref := h.auth.check(r)
	if ref != nil {
		writeRefusal(w, ref)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeRefusal(w, &refusal{http.StatusUnsupportedMediaType, kindBadRequest,
			fmt.Sprintf("httpstore: Content-Type %q refused: send application/json (a browser can send a form or text/plain to another origin without asking; it cannot send JSON)", r.Header.Get("Content-Type"))})
		return
	}
	op, ok := strings.CutPrefix(r.URL.Path, pathPrefix)
	if !ok {
		writeRefusal(w, &refusal{http.StatusNotFound, kindBadRequest, "httpstore: no such path " + r.URL.Path + " (the store API is POST /v1/<op>)"})
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		writeRefusal(w, &refusal{http.StatusServiceUnavailable, kindBusy, fmt.Sprintf("httpstore: %d calls are running, the server's cap; try again", cap(h.slots))})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRefusal(w, &refusal{http.StatusRequestEntityTooLarge, kindTooLarge,
				fmt.Sprintf("httpstore: request body larger than the server's bound of %d bytes", mbe.Limit)})
			return
		}
		// The client went away, or was slower than the read timeout: nothing runs.
		writeRefusal(w, &refusal{http.StatusRequestTimeout, kindBadRequest, "httpstore: the request body was not read whole (sent too slowly, or cut off): " + err.Error()})
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		writeRefusal(w, &refusal{http.StatusBadRequest, kindBadRequest, err.Error()})
		return
	}
	if h.authorize != nil {
		a := &Access{Op: op, DB: adapters.DBRef{Namespace: req.Namespace, Database: req.Database}, Expect: req.Expect, Data: req.Data}
		switch op {
		case opList:
			a.Key = req.Prefix
		case opGet, opPut, opDelete:
			a.Key = req.Key
		}
		if err := h.authorize(id, a); err != nil {
			writeRefusal(w, &refusal{http.StatusForbidden, kindForbidden, fmt.Sprintf("httpstore: %s refused for %s: %v", op, id, err)})
			return
		}
		req.Data = a.Data
	}
	writeJSON(w, h.call(r.Context(), op, req))
}

func (h *handler) call(ctx context.Context, op string, req *request) *response {
	db := adapters.DBRef{Namespace: req.Namespace, Database: req.Database}
	switch op {
	case opRead:
		rec, err := h.s.Read(ctx, db)
		return recordResponse(rec, err)
	case opCAS:
		next, err := shardmap.Decode(req.Record)
		if err != nil {
			return &response{Error: &wireError{Kind: kindBadRequest, Message: "httpstore: the record to write does not decode: " + err.Error()}}
		}
		v, err := h.s.CAS(ctx, db, req.Expect, next)
		if err != nil {
			return errResponse(err)
		}
		return &response{Version: v}
	case opWatch:
		wait := h.wait
		if req.WaitMS > 0 && time.Duration(req.WaitMS)*time.Millisecond < wait {
			wait = time.Duration(req.WaitMS) * time.Millisecond
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		rec, err := h.s.Watch(wctx, db, req.After)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return &response{Pending: true}
		}
		return recordResponse(rec, err)
	case opGet:
		b, err := h.s.GetBlob(ctx, req.Key)
		if err != nil {
			return errResponse(err)
		}
		return &response{Blob: &wireBlob{Key: b.Key, Version: b.Version, Data: b.Data}}
	case opPut:
		v, err := h.s.PutBlob(ctx, req.Key, req.Expect, req.Data)
		if err != nil {
			return errResponse(err)
		}
		return &response{Version: v}
	case opDelete:
		return errResponse(h.s.DeleteBlob(ctx, req.Key, req.Expect))
	case opList:
		bs, err := h.s.ListBlobs(ctx, req.Prefix)
		if err != nil {
			return errResponse(err)
		}
		return h.listPage(bs, req)
	}
	return &response{Error: &wireError{Kind: kindBadRequest, Message: "httpstore: unknown operation " + op}}
}

func recordResponse(rec *shardmap.Record, err error) *response {
	if err != nil {
		return errResponse(err)
	}
	enc, err := rec.MarshalBinary()
	if err != nil {
		return errResponse(err)
	}
	return &response{Record: enc}
}

// errResponse maps a store error to its wire form; nil gives an empty (successful) answer.
func errResponse(err error) *response {
	if err == nil {
		return &response{}
	}
	we := &wireError{Kind: kindOther, Message: err.Error()}
	var ce *adapters.ConflictError
	var bc *adapters.BlobConflictError
	switch {
	case errors.As(err, &ce):
		we.Kind, we.Expected = kindConflict, ce.Expected
		if ce.Current != nil {
			if enc, merr := ce.Current.MarshalBinary(); merr == nil {
				we.Current = enc
			}
		}
	case errors.As(err, &bc):
		we.Kind, we.Key, we.Expected, we.Version = kindBlobConflict, bc.Key, bc.Expected, bc.Current
	case errors.Is(err, adapters.ErrNotFound):
		we.Kind = kindNotFound
	case errors.Is(err, shardmap.ErrInvalid):
		we.Kind = kindInvalid
	case errors.Is(err, adapters.ErrClosed):
		we.Kind = kindClosed
	case errors.Is(err, adapters.ErrCorrupt):
		we.Kind = kindCorrupt
	}
	return &response{Error: we}
}

// listPage answers one page of a listing: the blobs after req.ListAfter (before it, in
// descending order, with Desc), at most the page size (or req.Limit when smaller) and
// pageBytes of data, More when some are left.
func (h *handler) listPage(bs []adapters.Blob, req *request) *response {
	limit := h.page
	if req.Limit > 0 && req.Limit < limit {
		limit = req.Limit
	}
	var order []adapters.Blob
	if req.Desc {
		end := len(bs)
		if req.ListAfter != "" {
			end = sort.Search(len(bs), func(i int) bool { return bs[i].Key >= req.ListAfter })
		}
		order = slices.Clone(bs[:end])
		slices.Reverse(order)
	} else {
		order = bs[sort.Search(len(bs), func(i int) bool { return bs[i].Key > req.ListAfter }):]
	}
	out := &response{Blobs: make([]wireBlob, 0, min(limit, len(order)))}
	size := 0
	for _, b := range order {
		if len(out.Blobs) == limit || (len(out.Blobs) > 0 && size+len(b.Data) > pageBytes) {
			out.More = true
			break
		}
		size += len(b.Data)
		out.Blobs = append(out.Blobs, wireBlob{Key: b.Key, Version: b.Version, Data: b.Data})
	}
	return out
}

func writeJSON(w http.ResponseWriter, r *response) {
	w.Header().Set("Content-Type", "application/json")
	writeBody(w, r)
}

func writeBody(w io.Writer, r *response) { _ = json.NewEncoder(w).Encode(r) }
