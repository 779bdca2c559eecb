package vtctld_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
)

// A client is made without connecting; a vtctld that is not there fails the first call
// with ErrUnreachable, saying where the client looked. (The tests of this package run the
// same calls against a real vtctld.)
func ExampleDial() {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close() // nothing listens at addr now

	c, err := vtctld.Dial(vtctld.Config{Addr: addr, Timeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	_, err = c.SrvKeyspace(context.Background(), "customer", "zone1")
	fmt.Println(errors.Is(err, adapters.ErrUnreachable))
	var ve *adapters.VitessError
	errors.As(err, &ve)
	fmt.Println(ve.Op, ve.Code)
	// Output:
	// true
	// GetSrvKeyspaces Unavailable
}

// A failover's Reparent step: Vitess is told that the replica promoted outside it is the
// primary of customer/-80. A deployment gives vtctld's --grpc-port address, and Config.TLS
// when vtctld serves TLS.
func ExampleClient_TabletExternallyReparented() {
	c, err := vtctld.Dial(vtctld.Config{Addr: "vtctld.example:15999"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	r, err := c.TabletExternallyReparented(context.Background(), "customer", "-80", "zone1-0000000101")
	if errors.Is(err, adapters.ErrWrongShard) {
		fmt.Println("the tablet serves another shard; nothing changed")
		return
	}
	fmt.Println(r.OldPrimary, "->", r.NewPrimary, err)
}
