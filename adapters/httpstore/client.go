package httpstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Client is a Store served by a Handler at a base URL. It is safe for concurrent use.
type Client struct {
	base    string
	url     string // where calls go: base, or http://unix for a socket
	token   string
	wait    time.Duration
	timeout time.Duration
	maxResp int64
	hc      *http.Client
	closed  atomic.Bool
	closing context.Context
	close   context.CancelFunc
}

var _ Store = (*Client)(nil)

// Dial returns a client of the server at base ("http://127.0.0.1:7070", or
// "unix:/run/loam/ctl.sock" for a server on a Unix socket). It does not connect: the first
// call does, and an unreachable server fails that call with adapters.ErrUnreachable.
func Dial(base string, opts *Options) (*Client, error) {
	if path, ok := strings.CutPrefix(base, "unix:"); ok {
		o := Options{}
		if opts != nil {
			o = *opts
		}
		if o.HTTPClient == nil {
			tr := newTransport(nil, defaultCallTimeout+defaultWatchWait)
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "unix", path)
			}
			o.HTTPClient = &http.Client{Transport: tr}
		}
		c, err := Dial("http://unix", &o)
		if err == nil {
			c.base = base
			c.url = "http://unix"
		}
		return c, err
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("httpstore: store URL %q must start with http:// or https://", base)
	}
	if strings.Contains(base, "?") || strings.Contains(base, "@") {
		return nil, fmt.Errorf("httpstore: store URL must be scheme://host:port with no credentials or query in it (set the token in the options; it is never sent in a URL)")
	}
	c := &Client{base: strings.TrimRight(base, "/"), url: strings.TrimRight(base, "/"), wait: defaultWatchWait, timeout: defaultCallTimeout, maxResp: DefaultMaxResponse}
	c.closing, c.close = context.WithCancel(context.Background())
	var tlsConf *tls.Config
	if opts != nil {
		c.token = opts.Token
		if opts.WatchWait > 0 {
			c.wait = opts.WatchWait
		}
		if opts.CallTimeout > 0 {
			c.timeout = opts.CallTimeout
		}
		if opts.MaxResponse > 0 {
			c.maxResp = opts.MaxResponse
		}
		c.hc = opts.HTTPClient
		tlsConf = opts.TLSConfig
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: newTransport(tlsConf, c.timeout+c.wait)}
	}
	return c, nil
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.base }

// Close makes every later call fail with adapters.ErrClosed and ends waiting watches.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.close()
	return nil
}

// call performs one operation and returns the answer; a failed store call comes back as
// resp.Error, a failed transport as err.
func (c *Client) call(ctx context.Context, op string, req *request) (*response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, adapters.ErrClosed
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	// Every call has a deadline: a server that accepts and never answers cannot hold the
	// caller (a lease renewal, a watch) past it.
	limit := c.timeout
	if op == opWatch {
		limit += time.Duration(req.WaitMS) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel) // Close ends calls in flight
	defer stop()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+pathPrefix+op, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		if c.closed.Load() {
			return nil, adapters.ErrClosed
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("httpstore: %s %s: %w: %v", op, c.base, adapters.ErrUnreachable, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, c.maxResp+1))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("httpstore: %s %s: reading the answer: %w: %v", op, c.base, adapters.ErrUnreachable, err)
	}
	if int64(len(data)) > c.maxResp {
		return nil, fmt.Errorf("httpstore: %s %s: the answer is larger than this client's bound of %d bytes (Options.MaxResponse); it was not read: %w", op, c.base, c.maxResp, ErrTooLarge)
	}
	if res.StatusCode != http.StatusOK {
		// A refusal carries its kind (unauthenticated, forbidden, too large, busy).
		if r, derr := decodeResponse(data); derr == nil && r.Error != nil {
			return nil, fmt.Errorf("httpstore: %s %s: HTTP %d: %w", op, c.base, res.StatusCode, r.Error.asError(adapters.DBRef{}))
		}
		return nil, fmt.Errorf("httpstore: %s %s: HTTP %d: %s", op, c.base, res.StatusCode, strings.TrimSpace(string(data)))
	}
	return decodeResponse(data)
}

func ref(db adapters.DBRef) *request { return &request{Namespace: db.Namespace, Database: db.Database} }

func (c *Client) record(db adapters.DBRef, r *response) (*shardmap.Record, error) {
	if r.Error != nil {
		return nil, r.Error.asError(db)
	}
	rec, err := shardmap.Decode(r.Record)
	if err != nil {
		return nil, fmt.Errorf("httpstore: %s: the served record does not decode: %w: %v", db, adapters.ErrCorrupt, err)
	}
	return rec, nil
}

// Read implements adapters.ShardMapStore.
func (c *Client) Read(ctx context.Context, db adapters.DBRef) (*shardmap.Record, error) {
	r, err := c.call(ctx, opRead, ref(db))
	if err != nil {
		return nil, err
	}
	return c.record(db, r)
}

// CAS implements adapters.ShardMapStore.
func (c *Client) CAS(ctx context.Context, db adapters.DBRef, expect uint64, next *shardmap.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if next == nil {
		return 0, fmt.Errorf("adapters: %s: CAS of a nil record", db)
	}
	enc, err := next.MarshalBinary()
	if err != nil {
		// A record the encoding refuses is invalid: say why as the store would.
		if verr := next.Validate(); verr != nil {
			return 0, fmt.Errorf("adapters: %s: refusing to store an invalid record: %w", db, verr)
		}
		return 0, fmt.Errorf("httpstore: %s: encoding the record: %w", db, err)
	}
	req := ref(db)
	req.Expect, req.Record = expect, enc
	r, err := c.call(ctx, opCAS, req)
	if err != nil {
		return 0, err
	}
	if r.Error != nil {
		return 0, r.Error.asError(db)
	}
	return r.Version, nil
}

// Watch implements adapters.ShardMapStore as a long poll, asked again until ctx ends.
func (c *Client) Watch(ctx context.Context, db adapters.DBRef, after uint64) (*shardmap.Record, error) {
	req := ref(db)
	req.After, req.WaitMS = after, c.wait.Milliseconds()
	for {
		r, err := c.call(ctx, opWatch, req)
		if err != nil {
			return nil, err
		}
		if !r.Pending {
			return c.record(db, r)
		}
	}
}

// GetBlob implements adapters.BlobStore.
func (c *Client) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	r, err := c.call(ctx, opGet, &request{Key: key})
	if err != nil {
		return adapters.Blob{}, err
	}
	if r.Error != nil {
		return adapters.Blob{}, r.Error.asError(adapters.DBRef{})
	}
	if r.Blob == nil {
		return adapters.Blob{}, fmt.Errorf("httpstore: get %q: the answer has no blob: %w", key, adapters.ErrCorrupt)
	}
	return adapters.Blob{Key: r.Blob.Key, Version: r.Blob.Version, Data: r.Blob.Data}, nil
}

// PutBlob implements adapters.BlobStore.
func (c *Client) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	if err := adapters.CheckBlobKey(key); err != nil {
		return 0, err
	}
	r, err := c.call(ctx, opPut, &request{Key: key, Expect: expect, Data: data})
	if err != nil {
		return 0, err
	}
	if r.Error != nil {
		return 0, r.Error.asError(adapters.DBRef{})
	}
	return r.Version, nil
}

// DeleteBlob implements adapters.BlobStore.
func (c *Client) DeleteBlob(ctx context.Context, key string, expect uint64) error {
	r, err := c.call(ctx, opDelete, &request{Key: key, Expect: expect})
	if err != nil {
		return err
	}
	if r.Error != nil {
		return r.Error.asError(adapters.DBRef{})
	}
	return nil
}

// ListBlobs implements adapters.BlobStore.
func (c *Client) ListBlobs(ctx context.Context, prefix string) ([]adapters.Blob, error) {
	out := []adapters.Blob{}
	req := &request{Prefix: prefix}
	for {
		r, err := c.call(ctx, opList, req)
		if err != nil {
			return nil, err
		}
		if r.Error != nil {
			return nil, r.Error.asError(adapters.DBRef{})
		}
		for _, b := range r.Blobs {
			out = append(out, adapters.Blob{Key: b.Key, Version: b.Version, Data: b.Data})
		}
		if !r.More || len(r.Blobs) == 0 {
			return out, nil
		}
		req.ListAfter = r.Blobs[len(r.Blobs)-1].Key
	}
}

// EachNewest calls fn with the blobs whose keys start with prefix in descending key order
// (newest first, for time-ordered keys such as the audit log's), a page at a time, until
// fn returns false or the listing ends: a reader of the last entries never has the whole
// listing sent to it.
func (c *Client) EachNewest(ctx context.Context, prefix string, fn func(adapters.Blob) bool) error {
	req := &request{Prefix: prefix, Desc: true}
	for {
		r, err := c.call(ctx, opList, req)
		if err != nil {
			return err
		}
		if r.Error != nil {
			return r.Error.asError(adapters.DBRef{})
		}
		for _, b := range r.Blobs {
			if !fn(adapters.Blob{Key: b.Key, Version: b.Version, Data: b.Data}) {
				return nil
			}
		}
		if !r.More || len(r.Blobs) == 0 {
			return nil
		}
		req.ListAfter = r.Blobs[len(r.Blobs)-1].Key
	}
}
