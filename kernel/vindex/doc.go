// Package vindex computes the keyspace IDs of Vitess's `hash` and `xxhash` vindexes, bit for
// bit as vtgate does (vitess.io/vitess v0.24.4), so that a control plane can tell which shard
// holds a row without asking Vitess. A keyspace ID is 8 bytes; its big-endian order is the
// order of Vitess key ranges, so it feeds keyrange lookups directly.
//
// The `hash` vindex is reversible: it encrypts the 64-bit key with DES under the all-zero key,
// a weak key for which encryption and decryption coincide. This package carries its own DES
// (FIPS 46-3, specialised to that key) because the standard library's cipher.Block costs an
// interface call and a key schedule per block and Vitess's wrapper an allocation; Hash here
// allocates nothing.
//
// The `xxhash` vindex hashes the value as Vitess holds it, which for numbers is their decimal
// text: XXHashInt64 and XXHashUint64 do that formatting without allocating.
//
// Proof of agreement: testdata/vitess_vindex.tsv holds keyspace IDs computed by Vitess's own
// vindexes and every row is checked; conformance/vitessdiff (a separate module, so that this
// one never depends on Vitess) compares 100,000 random inputs per vindex with Vitess itself.
package vindex
