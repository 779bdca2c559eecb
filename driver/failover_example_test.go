package driver_test

import (
	"context"
	"fmt"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/failover"
)

// A Vitess shard's primary was promoted away: the driver fences the old primary, has
// Vitess take the promoted tablet (TabletExternallyReparented, through the Vitess seam;
// adapters/vtctld in a deployment) and stores the record that mirrors it. Fakes stand in
// for the old primary and vtctld.
func ExampleFailover() {
	w := &world{}
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders"}}
	rec, _ := shardmap.NewVindex("customer", key, shardmap.VindexHash,
		shardmap.Backend{Host: "10.0.2.1", Port: 3306, Database: "customer", Tablet: "zone1-0000000100"},
		shardmap.Backend{Host: "10.0.2.2", Port: 3306, Database: "customer", Tablet: "zone1-0000000200"})
	store, db := &loggedStore{Store: memstore.New(), w: w}, adapters.DBRef{Namespace: "prod", Database: "customer"}
	rec.Version, _ = store.Store.CAS(context.Background(), db, 0, rec)
	old := &oldPrimary{key: driver.BackendKey(rec.Shards[0].Backend), w: w}

	exec := &driver.FailoverExecutor{
		DB: db, Store: store,
		Backend: driver.Lookup(map[string]adapters.ShardBackend{old.key: old}),
		Vitess:  &fakeVitess{w: w},
		OnDone:  func(d failover.Done) { fmt.Println(d) },
		Logger:  quiet,
	}
	start := failover.Start{Record: rec, Shard: "-80", Role: "app",
		Promoted: shardmap.Backend{Host: "10.0.2.3", Port: 3306, Database: "customer", Tablet: "zone1-0000000101"}}
	err := driver.Run(context.Background(), driver.Failover(exec),
		driver.Config[failover.Input]{ID: "prod/customer/-80", Store: store, Logger: quiet}, failover.Input(start))
	for _, e := range w.events() {
		fmt.Println(e)
	}
	fmt.Println("idle:", err)
	// Output:
	// Done outcome=repointed gen=2 fenced=true
	// fence 10.0.2.1:3306/customer role=app
	// reparent customer/-80 tablet=zone1-0000000101
	// cas gen=2 version=2
	// idle: <nil>
}
