package render_test

import (
	"fmt"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// A two-shard database hash-sharded on orders.customer_id, rendered for PgDog.
func ExamplePgDog() {
	rec := shardmap.NewPgHash("app",
		shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders"}},
		shardmap.Backend{Host: "10.0.0.11", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.12", Port: 5432, Database: "app"},
	)
	creds := render.Credentials{
		Users: []render.User{{Name: "app", Password: "app-secret"}},
		Admin: render.Admin{Password: "admin-secret"},
	}
	files, err := render.PgDog(rec, creds, render.PgDogOptions{TLS: render.TLS{
		Certificate: "/tls/pgdog.crt", PrivateKey: "/tls/pgdog.key", ServerCA: "/tls/shards-ca.pem",
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, _ := files.Get(render.PgDogConfigFile)
	fmt.Print(string(cfg.Data))
	// Output:
	// # pgdog.toml for PgDog, rendered by loam.dev/router from the shard map of "app" at generation 1.
	// # Do not edit: the next generation replaces this file. PgDog reports no config generation;
	// # SHOW POOLS shows database "app__generation_1", user "__loam_generation" once both files are loaded.
	//
	// [general]
	// auth_type = "scram"
	// passthrough_auth = "disabled"
	// cutover_save_config = false
	// tls_certificate = "/tls/pgdog.crt"
	// tls_private_key = "/tls/pgdog.key"
	// tls_client_required = true
	// tls_verify = "verify_full"
	// tls_server_ca_certificate = "/tls/shards-ca.pem"
	//
	// [[databases]]
	// name = "app"
	// shard = 0
	// role = "primary"
	// host = "10.0.0.11"
	// port = 5432
	// database_name = "app"
	//
	// [[databases]]
	// name = "app"
	// shard = 1
	// role = "primary"
	// host = "10.0.0.12"
	// port = 5432
	// database_name = "app"
	//
	// [[databases]]
	// name = "app__generation_1"
	// shard = 0
	// role = "primary"
	// host = "10.0.0.11"
	// port = 5432
	// database_name = "app"
	//
	// [[sharded_tables]]
	// database = "app"
	// name = "orders"
	// column = "customer_id"
	// data_type = "bigint"
}

// Reading the generation an instance loaded from its SHOW POOLS rows.
func ExampleGenerationFromPools() {
	rows := []render.PoolRow{
		{Database: "app", User: "app", Addr: "10.0.0.11", Port: 5432, Shard: 0, Role: "primary"},
		{Database: "app", User: "app", Addr: "10.0.0.12", Port: 5432, Shard: 1, Role: "primary"},
		{Database: "app__generation_4", User: "__loam_generation", Addr: "10.0.0.11", Port: 5432, Shard: 0, Role: "primary"},
	}
	g, known, err := render.GenerationFromPools("app", rows)
	fmt.Println(g, known, err)
	_, known, _ = render.GenerationFromPools("app", rows[:2])
	fmt.Println(known)
	// Output:
	// 4 true <nil>
	// false
}

// The ConfigMap that holds the files carries the generation as an annotation.
func ExampleAnnotations() {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "db0", Port: 5432, Database: "app"})
	rec.Generation = 12
	a := render.Annotations(rec)
	fmt.Println(a)
	g, err := render.GenerationFromAnnotations(a)
	fmt.Println(g, err)
	// Output:
	// map[loam.dev/router-generation:12]
	// 12 <nil>
}

// A Vitess keyspace with a hash vindex on customer_id, and its vtgate users.
func ExampleVitess() {
	rec, _ := shardmap.NewVindex("customer",
		shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"customer"}}, shardmap.VindexHash,
		shardmap.Backend{Host: "10.2.0.11", Port: 3306}, shardmap.Backend{Host: "10.2.0.12", Port: 3306})
	creds := render.Credentials{Users: []render.User{{Name: "app", Password: "mysql_password", Groups: []string{"writers"}}}}
	files, err := render.Vitess(rec, creds, render.VitessOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range files {
		fmt.Printf("== %s\n%s", f.Name, f.Data)
	}
	// Output:
	// == customer.vschema.json
	// {
	//   "sharded": true,
	//   "vindexes": {
	//     "hash": {
	//       "type": "hash"
	//     }
	//   },
	//   "tables": {
	//     "customer": {
	//       "column_vindexes": [
	//         {
	//           "column": "customer_id",
	//           "name": "hash"
	//         }
	//       ]
	//     }
	//   }
	// }
	// == vtgate_auth.json
	// {
	//   "app": [
	//     {
	//       "MysqlNativePassword": "*9E128DA0C64A6FCCCDCFBDD0FC0A2C967C6DB36F",
	//       "CachingSha2Password": "*edd6d7297051f55bf680a727fb9732672035a2ab65ab0426ba5ed76e1a0d9fcf",
	//       "UserData": "app",
	//       "Groups": [
	//         "writers"
	//       ]
	//     }
	//   ]
	// }
}
