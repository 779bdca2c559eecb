package httpstore

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
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
	// Token, when set, is required as "Authorization: Bearer <Token>" on every call.
	Token string
	// WatchWait bounds how long the server holds one watch call before answering
	// "pending" (default 20s). The client sends its own wish; the server takes the smaller.
	WatchWait time.Duration
	// HTTPClient is the client's transport (default: a client with no overall timeout,
	// since watches are long polls; each call is bounded by its context).
	HTTPClient *http.Client
}

const (
	defaultWatchWait = 20 * time.Second
	maxBody          = 16 << 20
	pathPrefix       = "/v1/"
)

// Handler serves s at /v1/<op>. Mount it at the root of a server (or strip a prefix).
func Handler(s Store, opts *Options) http.Handler {
	h := &handler{s: s, wait: defaultWatchWait}
	if opts != nil {
		h.token = opts.Token
		if opts.WatchWait > 0 {
			h.wait = opts.WatchWait
		}
	}
	return h
}

type handler struct {
	s     Store
	token string
	wait  time.Duration
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "httpstore: every call is a POST", http.StatusMethodNotAllowed)
		return
	}
	if h.token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(h.token)) != 1 {
			http.Error(w, "httpstore: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
	}
	op, ok := strings.CutPrefix(r.URL.Path, pathPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return // the client went away
	}
	var req request
	if len(body) > maxBody {
		writeJSON(w, &response{Error: &wireError{Kind: kindBadRequest, Message: "httpstore: request body larger than 16 MiB"}})
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, &response{Error: &wireError{Kind: kindBadRequest, Message: "httpstore: request is not JSON: " + err.Error()}})
		return
	}
	writeJSON(w, h.call(r.Context(), op, &req))
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
		out := &response{Blobs: make([]wireBlob, 0, len(bs))}
		for _, b := range bs {
			out.Blobs = append(out.Blobs, wireBlob{Key: b.Key, Version: b.Version, Data: b.Data})
		}
		return out
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

func writeJSON(w http.ResponseWriter, r *response) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r)
}
