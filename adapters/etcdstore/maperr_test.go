package etcdstore

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"loam.dev/router/adapters"
)

// TestMapErrServerDeadline: a member without quorum answers a request it could not commit
// with the context's error as code Unknown (seen from Grant while two of three members
// were down); that is no quorum, ErrUnreachable, as the controller's status must say.
// Another Unknown error is not.
func TestMapErrServerDeadline(t *testing.T) {
	s := &Store{endpoints: "http://127.0.0.1:1"}
	ctx := context.Background()
	for _, msg := range []string{"context deadline exceeded", "context canceled"} {
		err := s.mapErr(ctx, "grant", status.Error(codes.Unknown, msg))
		if !errors.Is(err, adapters.ErrUnreachable) {
			t.Fatalf("%q: %v, want ErrUnreachable", msg, err)
		}
	}
	if err := s.mapErr(ctx, "grant", status.Error(codes.Unknown, "something else")); errors.Is(err, adapters.ErrUnreachable) {
		t.Fatalf("an unknown error is not unreachability: %v", err)
	}
}
