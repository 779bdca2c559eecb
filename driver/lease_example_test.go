package driver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
)

// One active controller: the first to Acquire holds the lease and renews it with Hold; its
// steps go through a GuardedStore, which refuses every write once the lease is gone, so a
// deposed controller cannot save a machine's snapshot or write a record.
func ExampleLease() {
	store := memstore.New()
	lease, _ := driver.NewLease(store, driver.LeaseOptions{Holder: "ctl-a", TTL: time.Second, Logger: quiet})
	ctx, stop := context.WithCancel(context.Background())
	tok, _ := lease.Acquire(ctx)
	go lease.Hold(ctx) // renews every TTL/3 until stop
	fmt.Println("leader:", tok.Holder)

	guarded := driver.GuardedStore{Store: store, Lease: lease}
	_, err := guarded.PutBlob(ctx, "machine/demo/app", 0, []byte("state"))
	fmt.Println("save while leading:", err)

	stop()
	_ = lease.Release(context.Background()) // a standby takes over at once
	_, err = guarded.PutBlob(context.Background(), "machine/demo/app", 1, []byte("later"))
	fmt.Println("save after release refused:", errors.Is(err, driver.ErrNotLeader))
	// Output:
	// leader: ctl-a
	// save while leading: <nil>
	// save after release refused: true
}

// The audit log: wrap a machine's executor in Audited and every command it executes is
// recorded before and after, with who ran it under which lease tenure.
func ExampleAudited() {
	store := memstore.New()
	audit := driver.NewAudit(store, func() driver.Token { return driver.Token{Holder: "ctl-a", Epoch: 7} }, quiet)
	next := driver.ExecutorFunc[helloInput, helloCommand](func(ctx context.Context, c helloCommand) (helloInput, bool) {
		g := c.(helloGreet)
		return helloGreeted{Step: g.Step}, true
	})
	exec := &driver.Audited[helloInput, helloCommand]{Kind: "hello", ID: "demo", Next: next, Audit: audit}
	exec.Execute(context.Background(), helloGreet{Step: "greet/pgdog-1", Name: "pgdog-1"})
	exec.Flush() // the result entry is written off the command's path; Run flushes on return
	entries, _ := driver.ReadAudit(context.Background(), store, driver.AuditFilter{Machine: "hello"})
	for _, e := range entries {
		fmt.Printf("%s %s by %s@%d: %q\n", e.Event, e.Step, e.Holder, e.Epoch, e.Result)
	}
	// Output:
	// exec greet/pgdog-1 by ctl-a@7: ""
	// result greet/pgdog-1 by ctl-a@7: "ok"
}
