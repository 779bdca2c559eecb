package oracle_test

import (
	"fmt"

	"loam.dev/router/proof/oracle"
)

// Two answers to one request agree when they are the same canonical answer, or errors of the
// same kind: "field" and "error" are for people.
func ExampleAgree() {
	goAnswer := []byte(`{"ok":false,"kind":"unsorted","field":"shards[0][1]","error":"merge: shards[0][1] sorts before shards[0][0] under the ORDER BY; ..."}`)
	proved := []byte(`{"ok":false,"kind":"unsorted","field":"","error":"merge: a shard's rows are not sorted by the ORDER BY (proved oracle)"}`)
	fmt.Println(oracle.Agree(goAnswer, proved))
	fmt.Println(oracle.Agree([]byte(`{"ok":true,"rows":[[1.5]],"from":[0],"shard_limit":null}`),
		[]byte(`{"ok":true,"rows":[[1.50]],"from":[0],"shard_limit":null}`)))
	// Output:
	// true
	// false
}
