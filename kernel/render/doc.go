// Package render turns a shard map record into the routers' own files: PgDog's pgdog.toml
// and users.toml, Vitess's VSchema JSON and vtgate's static auth file. Output is
// byte-deterministic, so a rendered generation can be compared, hashed and golden-tested.
//
// The record is the truth and the files are a projection of it: pgdog.toml says
// cutover_save_config = false so that PgDog never writes its in-memory state back over
// them, and a record that fails shardmap's Validate is refused with that error.
// Credentials (Credentials, Secret) are a separate input; every secret goes to users.toml
// or the vtgate auth file, never to pgdog.toml, and no error message quotes one.
//
// # Which PgDog keys
//
// PgDog's config types reject unknown keys, so the renderer writes only keys PgDog
// 0.1.54 declares (checked in tests against the key names of PgDog's own JSON Schemas,
// testdata/pgdog_known_keys.txt). Range and list rules are written as
// [[sharded_tables.mapping]] under their table, which PgDog reads without a warning; the
// older top-level [[sharded_mappings]] still loads but logs a deprecation warning on every
// load, so it is never written. TLS uses the [general] keys tls_certificate,
// tls_private_key, tls_client_required, tls_verify and tls_server_ca_certificate (from
// the same schema); client certificates for PgDog-to-shard mTLS
// (tls_server_certificate/tls_server_private_key) are not rendered.
//
// # Seeing the generation
//
// PgDog has no config generation and shows no file content, so Loam cannot ask an
// instance what it loaded. The files therefore carry the generation in the one place
// PgDog reports them: SHOW POOLS, which lists a row per (user, database) pool. pgdog.toml
// has a database GenerationDatabase(db, g) = "<db>__generation_<g>" and users.toml a
// passwordless user GenerationUser = "__loam_generation" on that database; the marker row
// exists only when both files of generation g are loaded (see GenerationDatabase), and
// GenerationFromPools reads it back. ExpectedPools lists every row the files produce, so
// an adapter can also tell when an instance's routing differs from its files (after an
// in-memory CUTOVER). The ConfigMap that holds the files carries the generation as the
// annotation loam.dev/router-generation (Annotations, GenerationFromAnnotations).
package render
