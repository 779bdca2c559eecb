package vtctld

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"loam.dev/router/adapters"
)

// error wraps err as an *adapters.VitessError, keeping the gRPC status code of an RPC
// error (its message becomes Err) and saying what to do: fix when the caller knows, else
// what the code suggests.
func (c *Client) error(op, keyspace, shard, tablet string, err error, fix string) error {
	e := &adapters.VitessError{Op: op, Addr: c.addr, Keyspace: keyspace, Shard: shard, Tablet: tablet, Fix: fix, Err: err}
	code := codes.OK
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	default:
		if st, ok := status.FromError(err); ok {
			code, e.Err = st.Code(), errors.New(st.Message())
		}
	}
	if code != codes.OK {
		e.Code = code.String()
		fixFor := code
		// vtctld answers a missing topology node with code Unknown and the topology
		// server's message (checked on v0.24.4: ApplyVSchema of a keyspace that does not
		// exist, TabletExternallyReparented of a tablet it does not know).
		if code == codes.Unknown && strings.Contains(e.Err.Error(), "node doesn't exist") {
			e.Err, fixFor = fmt.Errorf("%w: %s", adapters.ErrNotFound, e.Err.Error()), codes.NotFound
		}
		if fix == "" {
			e.Fix = c.fix(op, keyspace, fixFor)
		}
	}
	return e
}

// fix says what a status code asks of an operator, for op.
func (c *Client) fix(op, keyspace string, code codes.Code) string {
	switch code {
	case codes.Unavailable:
		return "check that vtctld runs and serves gRPC at " + c.addr + " (its --grpc-port), with the same TLS setting as this client; the call may not have arrived, retry it"
	case codes.DeadlineExceeded:
		return "vtctld did not answer in time; check vtctld and its topology server, then retry (the call may have taken effect)"
	case codes.Canceled:
		return "the caller gave up on the call; it may have taken effect"
	case codes.Unimplemented:
		return "this server does not serve the Vtctld service; start vtctld with --service-map grpc-vtctld"
	case codes.Unauthenticated, codes.PermissionDenied:
		return "vtctld refused this client; check the client certificate and vtctld's --grpc-ca"
	case codes.NotFound:
		switch op {
		case "ApplyVSchema":
			return "create the keyspace first: vtctldclient CreateKeyspace " + keyspace
		case "GetSrvKeyspaces":
			return "check the keyspace and cell exist, and build the serving graph: vtctldclient RebuildKeyspaceGraph " + keyspace
		}
		return "check the names with vtctldclient GetTablets --keyspace " + keyspace
	case codes.Unknown:
		switch op {
		case "TabletExternallyReparented":
			return "vtctld could not make the tablet primary; check that its vttablet runs and serves (vtctldclient GetTablet <alias>), then retry"
		case "ExecuteFetchAsDBA":
			return "vtctld could not query the tablet's MySQL; check that its vttablet runs and serves (vtctldclient GetTablet <alias>), then retry"
		}
	case codes.InvalidArgument, codes.FailedPrecondition:
		if op == "ApplyVSchema" {
			return "vtctld rejected the VSchema; fix the record's scheme and render it again"
		}
		return "vtctld refused the request as it stands; read its message"
	}
	return ""
}
