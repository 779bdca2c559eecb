// Package httpstore serves a ShardMapStore and BlobStore over HTTP, and is a client of one,
// so that several processes can share one store: two controllers (the active one and its
// standby) on one embedded bbolt file, which bbolt would otherwise lock to a single process.
//
// `loamrouter store-serve` and `loamrouter serve` mount Handler; a controller configured
// with `store.kind = "remote"` talks to it through a Client. Every call is one POST of a
// JSON body to /v1/<op>; records travel in their canonical binary encoding, so what the
// client gets is bit for bit what the store holds. The server runs each call as one call on
// the store it wraps, so every guarantee of that store (compare-and-set, version counters,
// fsync before acknowledging) holds across the network, and the client passes the same
// store contract (conformance.RunStoreSuite) as the store behind it.
//
// Errors keep their meaning across the wire: a stale CAS is *adapters.ConflictError with
// the current record, a stale blob write *adapters.BlobConflictError, a refused record
// matches shardmap.ErrInvalid with the store's own message, and a server that cannot be
// reached wraps adapters.ErrUnreachable (the request may or may not have been applied, as
// with any store whose answer was lost).
//
// Watch is a long poll: the server waits on the store's own Watch for up to
// Options.WatchWait (default 20s) and the client asks again until its context ends, so a
// change is seen as soon as the store behind the server sees it.
//
// Every call is authenticated: the server accepts the Credentials it is given (bearer
// tokens, compared in constant time, never taken from a URL; or client certificates under
// mutual TLS) and refuses everything when it has none. Options.Authorize decides what each
// identity may touch (loamrouter gives operators and controllers different key spaces).
// Requests a browser could be made to send are refused: any Origin header, a Content-Type
// other than application/json, a Host the server does not listen as. Servers are bounded
// (NewServer's timeouts, MaxBody, MaxConcurrent, paged lists) and so are clients (a
// deadline on every call, MaxResponse). TLS: ServerTLS with LoadCertFiles (reloadable),
// ClientTLS with a CA file.
package httpstore
