package refrouter_test

import (
	"context"
	"fmt"
	"os"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

// Where the reference router sends keys under the files kernel/render writes for a
// two-shard database: the same shards Postgres hash partitioning (and PgDog) would pick.
func ExampleParseFiles() {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.11", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.12", Port: 5432, Database: "app"})
	rec.Generation = 4
	files, err := render.PgDog(rec, render.Credentials{
		Users: []render.User{{Name: "app", Password: "app-secret"}},
		Admin: render.Admin{Password: "admin-secret"},
	}, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	top, err := refrouter.ParseFiles(files)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := top.Generation("app")
	db := top.Databases["app"]
	fmt.Println("generation", g)
	for _, key := range []int64{1, 2, 3, 42} {
		s, _ := db.Shard(key)
		fmt.Printf("id %d -> shard %d on %s\n", key, s, db.Shards[s])
	}
	// Output:
	// generation 4
	// id 1 -> shard 0 on 10.0.0.11:5432/app
	// id 2 -> shard 0 on 10.0.0.11:5432/app
	// id 3 -> shard 1 on 10.0.0.12:5432/app
	// id 42 -> shard 0 on 10.0.0.11:5432/app
}

// Three instances of one database and eight clients writing through them, as a cutover
// test runs them. files are the rendered files of the current generation; table t has
// columns (id bigint primary key, worker int, seq bigint, router text).
func ExampleFleet() {
	var files render.Files // from render.PgDog, of generation 1
	root, _ := os.MkdirTemp("", "fleet")
	defer os.RemoveAll(root)
	fleet, err := refrouter.OpenFleet(refrouter.FleetOptions{Root: root, N: 3, Database: "app", User: "app", Files: files, Generation: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer fleet.Close()
	load := fleet.StartLoad(context.Background(), refrouter.LoadOptions{Workers: 8, Table: "t"})
	// ... drive the control plane through fleet.Instance(id), writing the files of the
	// next generations through fleet (a ConfigTarget) ...
	acked, fenced, failed := refrouter.Tally(load.Stop())
	fmt.Println(acked, fenced, failed)
}
