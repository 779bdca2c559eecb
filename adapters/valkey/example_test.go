package valkey_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/kernel/fencing"
)

// A pod running C on a cluster: acquire, check the fence before acting, release. (Needs a
// server at $REDIS_CLUSTER_ADDRS, so it is compiled but not run.)
func ExampleDirectory() {
	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{os.Getenv("REDIS_CLUSTER_ADDRS")}})
	if err != nil {
		return
	}
	defer c.Close()
	d, err := valkey.NewDirectory(c, fencing.Buzz, fencing.C)
	if err != nil {
		return
	}
	ctx := context.Background()
	s := fencing.Session{Community: "acme", ID: "sess42"}
	r, err := d.Acquire(ctx, s, "relay-7", 30*time.Second)
	if err != nil || !r.OK {
		fmt.Println("held by", r.Holder, err)
		return
	}
	if ok, _ := d.Validate(ctx, s, r.Lease); ok {
		fmt.Println("acting with generation", r.Lease.Gen)
	}
	_, _ = d.Release(ctx, s, r.Lease)
}

// Errors keep the server's prefix, so a caller can branch on CROSSSLOT, TRYAGAIN, NOSCRIPT...
func ExamplePrefix() {
	err := &valkey.ServerError{Op: "acquire", Prefix: "CROSSSLOT", Msg: "CROSSSLOT Keys in request don't hash to the same slot"}
	fmt.Println(valkey.Prefix(fmt.Errorf("relay: %w", err)))
	fmt.Println(errors.Is(fmt.Errorf("x: %w", valkey.ErrCrossSlot), valkey.ErrCrossSlot))
	// Output:
	// CROSSSLOT
	// true
}
