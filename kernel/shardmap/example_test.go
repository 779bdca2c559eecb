package shardmap_test

import (
	"fmt"

	sm "loam.dev/router/kernel/shardmap"
)

func ExampleLayout_Locate() {
	rec := sm.NewPgHash("app", sm.Key{Column: "customer_id", Type: sm.Bigint},
		sm.Backend{Host: "10.0.0.11", Port: 5432, Database: "app"},
		sm.Backend{Host: "10.0.0.12", Port: 5432, Database: "app"})
	loc, err := rec.Locate("42")
	if err != nil {
		panic(err)
	}
	fmt.Println(loc.Name)
	fmt.Println(loc.Why)
	// Output:
	// s0
	// partition hash 0xafd30d9a116a5a62 of bigint 42 mod 2 = 0
}

func ExampleRecord_Validate() {
	rec := sm.NewPgHash("app", sm.Key{Column: "id", Type: sm.Bigint},
		sm.Backend{Host: "10.0.0.11", Port: 5432, Database: "app"},
		sm.Backend{Host: "10.0.0.12", Port: 0, Database: "app"})
	rec.Shards[1].Name = "s0"
	fmt.Println(rec.Validate())
	// Output:
	// shardmap: 2 problems:
	//   shards[1].name: "s0" is used twice (also shards[0]); names must be unique
	//   shards[1].backend.port: is 0; give the server's port
}
