package vtctld_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	topodatapb "vitess.io/vitess/go/vt/proto/topodata"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
)

// A failover's Reparent step: Vitess is told that the replica promoted outside it is the
// shard's primary. Here vtctld is the package's in-process stand-in; a deployment gives
// vtctld's --grpc-port address (and Config.TLS when vtctld serves TLS).
func ExampleClient_TabletExternallyReparented() {
	s := newStandIn()
	s.addTablet("zone1-0000000100", "customer", "-80", topodatapb.TabletType_PRIMARY)
	s.addTablet("zone1-0000000101", "customer", "-80", topodatapb.TabletType_REPLICA)
	s.addTablet("zone1-0000000200", "customer", "80-", topodatapb.TabletType_PRIMARY)
	addr, stop, err := serve(s)
	if err != nil {
		panic(err)
	}
	defer stop()

	c, err := vtctld.Dial(vtctld.Config{Addr: addr, Timeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	r, err := c.TabletExternallyReparented(ctx, "customer", "-80", "zone1-0000000101")
	fmt.Println(r.OldPrimary, "->", r.NewPrimary, err)

	// A tablet of another shard is refused before anything changes.
	_, err = c.TabletExternallyReparented(ctx, "customer", "-80", "zone1-0000000200")
	fmt.Println(errors.Is(err, adapters.ErrWrongShard))
	// Output:
	// zone1-0000000100 -> zone1-0000000101 <nil>
	// true
}
