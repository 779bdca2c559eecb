package pgdog_test

import (
	"context"
	"fmt"
	"os"

	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// Pushing generation 2 to an instance and reading back what it loaded. Here the instance
// is the tests' stand-in for PgDog's admin database, started with the files in dir.
func ExampleInstance_Apply() {
	dir, _ := os.MkdirTemp("", "pgdog")
	defer os.RemoveAll(dir)
	standin, _ := newStandIn(dir, "admin-secret")
	defer standin.Close()

	inst, err := pgdog.New(pgdog.Config{
		ID:       "pgdog-1",
		Admin:    standin.DSN(), // postgres://admin:<password>@<host>:6432/admin
		Dir:      dir,           // where the instance's --config and --users files are
		Database: "app",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer inst.Close()

	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "10.0.0.11", Port: 5432, Database: "app"},
		shardmap.Backend{Host: "10.0.0.12", Port: 5432, Database: "app"})
	rec.Generation = 2
	files, err := render.PgDog(rec, render.Credentials{
		Users: []render.User{{Name: "app", Password: "app-secret"}},
		Admin: render.Admin{Password: "admin-secret"},
	}, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	applied, err := inst.Apply(ctx, rec.Generation, files)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("applied generation", applied.Generation)

	if err := inst.Pause(ctx, "App"); err != nil {
		fmt.Println(err)
	}
	_ = inst.Pause(ctx, "app")
	o, _ := inst.Observe(ctx)
	fmt.Println("observed generation", o.Generation, "paused", o.Paused)
	// Output:
	// applied generation 2
	// router pgdog-1 Pause: pgdog: database name "App" has upper-case letters; PgDog lowercases every admin command, so it would act on another name (use lower case names for databases, users, publications and slots)
	// observed generation 2 paused [app]
}
