package vindex_test

import (
	"errors"
	"fmt"

	"loam.dev/router/kernel/vindex"
)

func ExampleHash() {
	ksid := vindex.Hash(1)
	fmt.Printf("%x\n", ksid)
	// A negative BIGINT is hashed as its two's-complement bits.
	var id int64 = -1
	fmt.Printf("%x\n", vindex.Hash(uint64(id)))
	// Output:
	// 166b40b44aba4bd6
	// 355550b2150e2451
}

func ExampleUnhash() {
	ksid := vindex.Hash(9223372036854775807)
	fmt.Println(vindex.Unhash(ksid))
	// Output: 9223372036854775807
}

func ExampleHashText() {
	// A VARCHAR sharding column holding digits hashes like the number.
	k, err := vindex.HashText(" 007\t")
	fmt.Printf("%x %v\n", k, err)
	// Anything else has no keyspace id: Vitess sends the row nowhere.
	_, err = vindex.HashText("-1")
	fmt.Println(errors.Is(err, vindex.ErrNotUint64))
	// Output:
	// fb8baaad918119b8 <nil>
	// true
}

func ExampleXXHash() {
	fmt.Printf("%x\n", vindex.XXHash([]byte("test1")))
	fmt.Printf("%x\n", vindex.XXHashString("test1"))
	// Integers are hashed as their decimal text.
	fmt.Printf("%x %x\n", vindex.XXHashInt64(1), vindex.XXHashString("1"))
	// Output:
	// d01ab7e4d6978f0b
	// d01ab7e4d6978f0b
	// d46405367612b4b7 d46405367612b4b7
}
