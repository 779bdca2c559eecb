package pglaunch_test

import (
	"context"
	"errors"
	"fmt"

	"loam.dev/router/pglaunch"
)

// A program starts a throwaway server, uses it, and removes it.
func ExampleStart() {
	ctx := context.Background()
	srv, err := pglaunch.Start(ctx, pglaunch.WithSetting("wal_level", "logical"))
	if errors.Is(err, pglaunch.ErrNoBinaries) {
		fmt.Println("install postgresql, or set", pglaunch.EnvBinDir)
		return
	}
	if err != nil {
		panic(err)
	}
	defer srv.Close() // Stop instead keeps the data directory to look at
	fmt.Println(srv.DSN("postgres") != "")
}
