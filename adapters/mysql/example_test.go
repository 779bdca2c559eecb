package mysql_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/adapters"
	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
)

// A failover fences the old primary of shard -80 before Vitess is told about the new one,
// then split verification compares the rows of shard 80- under the keyspace's hash vindex.
func ExampleBackend_FenceWrites() {
	ctx := context.Background()
	old, err := mysqlad.Open(ctx, "vt_dba:secret@tcp(commerce-80-a.db.internal:3306)/vt_commerce", mysqlad.Options{
		TLS: &tls.Config{ServerName: "commerce-80-a.db.internal"},
	})
	if err != nil {
		log.Fatal(err) // the old primary is often down: a failover goes on without its fence
	}
	defer old.Close()
	if err := old.FenceWrites(ctx, "vt_app"); err != nil {
		log.Fatal(err) // the fence is not known to hold
	}
	ranges, _ := keyrange.Split(keyrange.Full(), 2)
	scheme := shardmap.Vindex{Key: shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}, Kind: shardmap.VindexHash, Ranges: ranges}
	d, err := old.Checksum(ctx, "vt_commerce.orders", adapters.ShardFn{Scheme: scheme, Shard: 1})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("80- of orders: %d rows, digest %x", d.Rows, d.Sum)
}

// A login refused by the fence, in the control plane's terms, keeping the MySQL number.
func ExampleClassify() {
	serverErr := &mysql.MySQLError{Number: 4151, Message: "Access denied, this account is locked"}
	err := mysqlad.Classify("10.0.0.7:3306", "Login", fmt.Errorf("connect: %w", serverErr))
	var be *adapters.BackendError
	if errors.As(err, &be) {
		fmt.Println(errors.Is(err, adapters.ErrFenced), be.Code)
	}
	fmt.Println(err)
	// Output:
	// true 4151
	// 10.0.0.7:3306 Login [4151]: connect: Error 4151: Access denied, this account is locked
}

// Positions of both flavors, and what comparing them says.
func ExampleComparePositions() {
	for _, p := range [][2]string{
		{"0-1-15", "0-1-14"},
		{"0-1-14,1-2-7", "0-1-15"},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-3:5"},
	} {
		c, err := mysqlad.ComparePositions(p[0], p[1])
		fmt.Println(c, err)
	}
	// Output:
	// 1 <nil>
	// 0 mysql: positions 0-1-14,1-2-7 and 0-1-15 are not ordered: each holds transactions the other lacks
	// 1 <nil>
}

// How Prepared names XA branches.
func ExampleXID_GID() {
	plain, _ := mysqlad.ParseRecoverRow(1, 12, 0, []byte("__pgdog_2pc_"))
	other, _ := mysqlad.ParseRecoverRow(7, 7, 2, []byte("gtrid-1bq"))
	fmt.Println(plain.GID())
	fmt.Println(other.GID())
	// Output:
	// __pgdog_2pc_
	// X'67747269642d31',X'6271',7
}
