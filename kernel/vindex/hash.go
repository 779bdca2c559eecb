package vindex

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Hash is the keyspace ID Vitess's `hash` vindex gives the integer v: v written as 8 bytes
// big-endian, encrypted as one DES block under the all-zero key. A signed key is passed as its
// two's-complement bits (uint64(int64(-1)) hashes like UINT64 18446744073709551615, as in
// Vitess). It never allocates.
func Hash(v uint64) [8]byte {
	var ksid [8]byte
	binary.BigEndian.PutUint64(ksid[:], desNullKey(v))
	return ksid
}

// Unhash is the reverse map of the `hash` vindex: the integer whose keyspace ID is ksid. Every
// 8-byte value is the keyspace ID of exactly one integer, so Unhash never fails; a keyspace ID
// of another length is refused by UnhashBytes.
func Unhash(ksid [8]byte) uint64 {
	return desNullKey(binary.BigEndian.Uint64(ksid[:]))
}

// UnhashBytes is Unhash for a keyspace ID held in a slice, as keyspace IDs travel through
// Vitess's APIs. Like Vitess's ReverseMap it refuses any length but 8.
func UnhashBytes(ksid []byte) (uint64, error) {
	if len(ksid) != 8 {
		return 0, fmt.Errorf("vindex: hash keyspace id %q is %d bytes long: %w",
			hex.EncodeToString(ksid), len(ksid), ErrKeyspaceIDLength)
	}
	return Unhash([8]byte(ksid)), nil
}

// HashText is the keyspace ID the `hash` vindex gives a value that Vitess does not hold as a
// signed integer (UINT64, VARCHAR, VARBINARY, DECIMAL, ...): the value's text is parsed by
// ParseUint64 and the number hashed. A text that does not parse has no keyspace ID (Vitess
// routes the row to no shard); the error says why.
func HashText(text string) ([8]byte, error) {
	v, err := ParseUint64(text)
	if err != nil {
		return [8]byte{}, err
	}
	return Hash(v), nil
}
