package refrouter_test

import (
	"fmt"

	"loam.dev/router/refrouter"
)

// A client names the statement's sharding key in a leading comment; the router's Server
// reads it back and sends the statement to that key's shard.
func ExampleWithShardingKey() {
	sql, _ := refrouter.WithShardingKey(int64(1234), "INSERT INTO t (id) VALUES (1234)")
	fmt.Println(sql)
	key, _ := refrouter.ParseShardingKey(sql)
	fmt.Println(key)
	_, err := refrouter.ParseShardingKey("INSERT INTO t (id) VALUES (1)")
	fmt.Println(err != nil)
	// Output:
	// /* pgdog_sharding_key: '1234' */ INSERT INTO t (id) VALUES (1234)
	// 1234
	// true
}

// The admin commands are parsed as PgDog parses them: semicolons stripped, lowercased,
// words split on single spaces.
func ExampleParseAdmin() {
	c, _ := refrouter.ParseAdmin("COPY_DATA app app__reshard_2 loam_app Slot_1;")
	fmt.Println(c.Verb, c.Args)
	_, err := refrouter.ParseAdmin("SHOW  POOLS")
	fmt.Println(err)
	// Output:
	// copy_data [app app__reshard_2 loam_app slot_1]
	// syntax error in admin command: "SHOW  POOLS"
}
