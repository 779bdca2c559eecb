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
// The protocol has no encryption; a bearer token (Options.Token) keeps other local users
// out. Serve it on a loopback address or behind a TLS proxy.
package httpstore
