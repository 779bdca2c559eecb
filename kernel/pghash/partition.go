package pghash

// HashPartitionSeed is HASH_PARTITION_SEED (src/include/catalog/partition.h): the seed every
// column of a hash partition key is hashed with.
const HashPartitionSeed uint64 = 0x7A5B22367996DCFD

// combineConstant is the constant of hash_combine64.
const combineConstant uint64 = 0x49a0f4dd15e5a8e3

// HashCombine64 is hash_combine64(a, b) (src/include/common/hashfn.h), the step that folds
// one key column's hash b into the row hash a.
func HashCombine64(a, b uint64) uint64 {
	return a ^ (b + combineConstant + a<<54 + a>>7)
}

// Row accumulates the row hash of a partition key, the way Postgres's
// compute_partition_hash_value does: starting from zero, each column's extended hash under
// HashPartitionSeed is combined in key order, and a NULL column is skipped. Add the columns
// in the order of the PARTITION BY HASH clause. The zero Row is an empty key (or one whose
// columns are all NULL), whose hash is 0: such a row goes to remainder 0.
type Row struct{ hash uint64 }

// Hash is the row hash: the value Postgres takes modulo the greatest modulus.
func (r Row) Hash() uint64 { return r.hash }

// Remainder is the remainder of the partition FOR VALUES WITH (MODULUS modulus, ...) that
// Postgres routes the row to, which is also the shard of a PgDog cluster of that many
// shards. The modulo is unsigned: about half of all row hashes are 2^63 or more. A modulus
// of 0 panics, as integer division by zero does.
func (r Row) Remainder(modulus uint64) uint64 { return r.hash % modulus }

// Column combines one non-NULL column given by its extended hash under HashPartitionSeed,
// for key types this package has no method for.
func (r *Row) Column(hash uint64) { r.hash = HashCombine64(r.hash, hash) }

// Null adds a NULL column, which leaves the row hash as it is; it exists so that code
// reading a key column by column says what it does.
func (r *Row) Null() {}

// Int8 adds a bigint column.
func (r *Row) Int8(v int64) { r.Column(partitionHashUint32(foldInt8(v))) }

// Int4 adds an integer column.
func (r *Row) Int4(v int32) { r.Column(partitionHashUint32(uint32(v))) }

// Int2 adds a smallint column.
func (r *Row) Int2(v int16) { r.Column(partitionHashUint32(uint32(int32(v)))) }

// Text adds a text or varchar column under a deterministic collation (see HashTextExtended).
func (r *Row) Text(s string) { r.Column(hashBytes(s, HashPartitionSeed)) }

// Bpchar adds a char(n) column.
func (r *Row) Bpchar(s string) { r.Column(HashBpcharExtended(s, HashPartitionSeed)) }

// UUID adds a uuid column.
func (r *Row) UUID(u [16]byte) { r.Column(hashBytes(u[:], HashPartitionSeed)) }

// Bytea adds a bytea column.
func (r *Row) Bytea(b []byte) { r.Column(hashBytes(b, HashPartitionSeed)) }

// ShardOfInt8 is the shard of a bigint key among shards shards: the remainder of the
// partition Postgres routes the key to in a table PARTITION BY HASH over that one column with
// that modulus, and the shard PgDog's default hasher picks. For a single column the row hash
// is the column hash plus the combine constant, taken modulo 2^64.
func ShardOfInt8(v int64, shards uint64) uint64 {
	return (partitionHashUint32(foldInt8(v)) + combineConstant) % shards
}

// ShardOfInt4 is ShardOfInt8 for an integer key; the two agree on every int32.
func ShardOfInt4(v int32, shards uint64) uint64 {
	return (partitionHashUint32(uint32(v)) + combineConstant) % shards
}

// ShardOfText is the shard of a text or varchar key (deterministic collation, UTF8 database).
func ShardOfText(s string, shards uint64) uint64 {
	return (hashBytes(s, HashPartitionSeed) + combineConstant) % shards
}

// ShardOfUUID is the shard of a uuid key.
func ShardOfUUID(u [16]byte, shards uint64) uint64 {
	return (hashBytes(u[:], HashPartitionSeed) + combineConstant) % shards
}

// ShardOfBytea is the shard of a bytea key.
func ShardOfBytea(b []byte, shards uint64) uint64 {
	return (hashBytes(b, HashPartitionSeed) + combineConstant) % shards
}

// The lookup3 state after seeding with HashPartitionSeed for a 4-byte input: every integer
// key starts here, so the seed's mix is done once, at compile time. TestPartitionState checks
// these against start(4, HashPartitionSeed).
const (
	partitionA uint32 = 0xe933553e
	partitionB uint32 = 0xc5da07a8
	partitionC uint32 = 0xfdfd95ed
)

// partitionHashUint32 is hashUint32(k, HashPartitionSeed) with the seeding precomputed.
func partitionHashUint32(k uint32) uint64 {
	b, c := final(partitionA+k, partitionB, partitionC)
	return uint64(b)<<32 | uint64(c)
}
