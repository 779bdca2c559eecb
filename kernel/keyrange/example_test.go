package keyrange_test

import (
	"fmt"

	"loam.dev/router/kernel/keyrange"
)

func Example() {
	shards, _ := keyrange.ParseSpec("-40-80-c0-")
	p, _ := keyrange.NewPartition(shards)
	ksid := [8]byte{0x93, 0x12} // e.g. what vindex.Hash returned for a key
	fmt.Println(shards[p.Lookup(ksid)])

	halves, _ := keyrange.Split(keyrange.MustParse("80-c0"), 2)
	fmt.Println(halves)
	// Output:
	// 80-c0
	// [80-a0 a0-c0]
}
