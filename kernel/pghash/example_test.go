package pghash_test

import (
	"fmt"

	"loam.dev/router/kernel/pghash"
)

func ExampleShardOfInt8() {
	// The partition of a bigint key in a table PARTITION BY HASH (id) with modulus 8, and the
	// PgDog shard of the key in an 8-shard cluster.
	fmt.Println(pghash.ShardOfInt8(1, 8), pghash.ShardOfInt8(-1, 8))
	// Output: 0 5
}

func ExampleShardOfText() {
	fmt.Println(pghash.ShardOfText("abc", 16))
	// Output: 5
}

func ExampleShardOfUUID() {
	u, err := pghash.ParseUUID("123e4567-e89b-12d3-a456-426614174000")
	if err != nil {
		panic(err)
	}
	fmt.Println(pghash.ShardOfUUID(u, 5))
	// Output: 1
}

func ExampleHashInt8Extended() {
	// SELECT hashint8extended(1, 8816678312871386365) prints the signed value.
	fmt.Println(int64(pghash.HashInt8Extended(1, pghash.HashPartitionSeed)))
	// Output: 5968994663651403477
}

func ExampleRow() {
	// PARTITION BY HASH (tenant_id, region): add the columns in key order.
	var r pghash.Row
	r.Int8(42)
	r.Text("eu-west")
	fmt.Println(r.Remainder(7))
	// A NULL column adds nothing: (42, NULL) goes where (42) alone would.
	var withNull pghash.Row
	withNull.Int8(42)
	withNull.Null()
	fmt.Println(withNull.Remainder(7), pghash.ShardOfInt8(42, 7))
	// Output:
	// 6
	// 0 0
}

func ExampleShardOfKey() {
	// The shard of a key held as text, typed by its column type.
	typ, err := pghash.ParseType("uuid")
	if err != nil {
		panic(err)
	}
	shard, err := pghash.ShardOfKey(typ, "{123E4567-E89B-12D3-A456-426614174000}", 5)
	fmt.Println(shard, err)
	// Output: 1 <nil>
}

func ExampleParseKey() {
	// A key held as text, typed by its column type.
	typ, _ := pghash.ParseType("bigint")
	r, err := pghash.ParseKey(typ, " -1 ")
	fmt.Println(r.Remainder(8), err)
	_, err = pghash.ParseKey(typ, "9223372036854775808")
	fmt.Println(err)
	// Output:
	// 5 <nil>
	// pghash: "9223372036854775808" is out of range for type bigint: value out of range (SQLSTATE 22003)
}
