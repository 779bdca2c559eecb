package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/etcdstore"
	"loam.dev/router/conformance"
)

// Open a store on a cluster, with etcd's credentials from the environment, and create a
// record with expect 0. (Compiled, not run: it needs a cluster; the tests start one.)
func ExampleOpen() {
	s, err := etcdstore.Open(etcdstore.Options{
		Endpoints: []string{"http://127.0.0.1:2379"},
		Prefix:    "loam/",
		Username:  os.Getenv("ETCD_USER"),
		Password:  os.Getenv("ETCD_PASSWORD"),
		Timeout:   5 * time.Second,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	db := adapters.DBRef{Namespace: "default", Database: "app"}
	v, err := s.CAS(context.Background(), db, 0, conformance.SampleRecord("app", 1))
	fmt.Println(v, err)
}
