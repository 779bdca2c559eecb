package causalread_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"loam.dev/router/driver/causalread"
	"loam.dev/router/kernel/lsn"
)

// An application with one primary (hostgroup 1) and one standby (hostgroup 2) reads its own
// writes from the standby. The selector polls both servers on its own connections; the
// application's pools only ever run the application's statements.
func ExampleCausalSelector() {
	ctx := context.Background()
	primary := lsn.Endpoint{Host: "10.0.0.1", Port: 5432}
	standby := lsn.Endpoint{Host: "10.0.0.2", Port: 5432}
	sel := causalread.NewCausalSelector(causalread.CausalConfig{AcquireTimeout: 2 * time.Second})
	defer sel.Close()
	for _, ep := range []lsn.Endpoint{primary, standby} {
		pool, err := pgxpool.New(ctx, fmt.Sprintf("postgres://app@%s/app", ep))
		if err != nil {
			panic(err)
		}
		defer pool.Close()
		if err := sel.AddEndpoint(ep, pool, pool.Config().ConnConfig); err != nil {
			panic(err)
		}
	}
	_ = sel.SetHostgroup(1, primary)
	_ = sel.SetHostgroup(2, standby)

	session := sel.Frontend("user-42")
	w, err := session.Acquire(ctx, 1)
	if err != nil {
		panic(err)
	}
	_, err = w.Exec(ctx, "INSERT INTO carts (user_id, item) VALUES (42, 'tea')")
	w.Release() // records the write: hostgroup 1, the primary, now
	if err != nil {
		panic(err)
	}

	r, err := session.AcquireCausal(ctx, 2, 1) // a standby that has replayed the insert
	if err != nil {
		panic(err) // errors.Is(err, causal.ErrNotReached) after the acquisition timeout
	}
	var n int
	err = r.QueryRow(ctx, "SELECT count(*) FROM carts WHERE user_id = 42").Scan(&n)
	r.Release()
	fmt.Println(n, err)

	for _, row := range sel.Stats() { // stats_pgsql_lsn
		fmt.Println(row)
	}
}
