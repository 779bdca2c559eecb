// Package pghash computes PostgreSQL's extended hash functions and hash-partition routing bit
// for bit, so that a control plane knows which partition, and therefore which PgDog shard,
// holds a row without asking Postgres.
//
// A table PARTITION BY HASH routes a row by its row hash: each key column's extended hash
// (support function 2 of the column type's hash operator class, seeded with
// HASH_PARTITION_SEED) folded in key order with hash_combine64, NULL columns skipped, taken
// modulo the modulus as an unsigned 64-bit number. PgDog's default sharding function is the
// same computation with the shard count as the modulus, so shard i of an n-shard cluster holds
// exactly the rows of the partition FOR VALUES WITH (MODULUS n, REMAINDER i). ShardOfInt8,
// ShardOfText and ShardOfUUID compute that for one-column keys; Row does any key.
//
// The functions are ported from the algorithm (PostgreSQL's src/common/hashfn.c, lookup3 with
// a 64-bit seed; see NOTICE), not from any other implementation. What they assume, as the
// vectors do: a little-endian server (big-endian servers read text, uuid and bytea words the
// other way round), a UTF8 database for text, and a deterministic collation for text keys.
//
// The hot path does not allocate, and for integer keys the seeding of HASH_PARTITION_SEED is
// folded into constants, leaving one lookup3 final and a division per key.
//
// Proof of agreement: testdata/pg_hashextended.tsv and testdata/pg_hash_partition.tsv were
// produced by Postgres 15.18 and every row is checked; TestReal... tests start a real server
// and compare random keys routed into real hash-partitioned tables.
package pghash
