package model_test

import (
	"fmt"

	"loam.dev/router/detsim/model"
)

// A fenced role cannot log in, and the fence ends the role's sessions: a write through a
// session opened before the fence fails too.
func ExampleBackend_FenceWrites() {
	b := model.NewBackend(nil, "shard-0", "app")
	_, sess, _ := b.Exec("app", 0, "pgdog-0", model.Txn{ID: 1, Ops: []model.Op{{Kind: model.OpAppend, Key: "k", Value: 1}}})
	_ = b.FenceWrites("app")
	_, _, err := b.Exec("app", sess, "pgdog-0", model.Txn{ID: 2, Ops: []model.Op{{Kind: model.OpAppend, Key: "k", Value: 2}}})
	fmt.Println(err)
	_, _, err = b.Exec("app", 0, "pgdog-0", model.Txn{ID: 3, Ops: []model.Op{{Kind: model.OpAppend, Key: "k", Value: 3}}})
	fmt.Println(err)
	fmt.Println(b.Row("k"))
	// Output:
	// shard-0 Exec [57P01]: session 1 ended (fence)
	// shard-0 Exec [28000]: role "app" is not permitted to log in
	// [1]
}
