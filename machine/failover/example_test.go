package failover_test

import (
	"fmt"

	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
)

// A PgDog shard fails over: the old primary is fenced first, then the record names the
// promoted one at generation 5, then ConfigPush gets generation 5.
func Example() {
	rec, shard, promoted := pgFixture()
	m := failover.New()
	ctx := &machine.Ctx{Now: 1000}
	for _, c := range m.On(ctx, failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app"}) {
		fmt.Println(c)
	}
	for _, c := range m.On(ctx, failover.Reply{Step: "app/s1/4/fence", Attempt: 1}) {
		fmt.Println(c)
	}
	for _, c := range m.On(ctx, failover.RecordWritten{Step: "app/s1/4/repoint@30", Attempt: 1, Version: 31}) {
		fmt.Println(c)
	}
	// Output:
	// FenceOld step=app/s1/4/fence shard=s1 backend=10.0.1.2:5432/app role=app
	// WriteRecord step=app/s1/4/repoint@30 expect=30 gen=5 backend=10.0.1.12:5432/app
	// Push step=app/s1/4/push gen=5
}
