package httpstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance"
)

// Serving a store to other processes: one process mounts Handler over its store, the
// others Dial it and use it as any ShardMapStore and BlobStore, conflicts included.
func Example() {
	// The server accepts the credentials it is given (here one controller token, in a
	// deployment read from a file or the environment); the client sends its token.
	token := "example-token"
	srv := httptest.NewServer(httpstore.Handler(memstore.New(), &httpstore.Options{
		Credentials: []httpstore.Credential{{Name: "ctl-a", Role: httpstore.RoleController, Token: token}},
	}))
	defer srv.Close()
	st, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: token})
	defer st.Close()

	ctx := context.Background()
	db := adapters.DBRef{Namespace: "prod", Database: "app"}
	v, _ := st.CAS(ctx, db, 0, conformance.SampleRecord("app", 1))
	fmt.Println("created version", v)
	_, err := st.CAS(ctx, db, 0, conformance.SampleRecord("app", 1))
	var ce *adapters.ConflictError
	fmt.Println(errors.As(err, &ce), ce.Current.Version)
	// Output:
	// created version 1
	// true 1
}
