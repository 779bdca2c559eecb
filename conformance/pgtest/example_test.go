package pgtest_test

import (
	"context"
	"testing"
	"time"

	"loam.dev/router/conformance/pgtest"
)

// A test with its own primary and a delayed standby.
func ExampleStart() {
	_ = func(t *testing.T) {
		primary := pgtest.Start(t, pgtest.WithSetting("max_prepared_transactions", "10"))
		primary.CreateDatabase(t, "app")
		primary.Exec(t, "app", "CREATE TABLE t (id int8 PRIMARY KEY)")

		standby := primary.StartStandby(t, pgtest.WithSetting("recovery_min_apply_delay", "200ms"))
		primary.Exec(t, "app", "INSERT INTO t VALUES (1)")
		standby.WaitCaughtUp(t, time.Minute)

		conn := standby.Connect(t, "app") // a *pgx.Conn, closed when the test ends
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
}
