// Package render turns a shard map record into the routers' own files: PgDog's pgdog.toml
// and users.toml, Vitess's VSchema JSON and vtgate's static auth file. Output is
// byte-deterministic, so a rendered generation can be compared, hashed and golden-tested.
package render
