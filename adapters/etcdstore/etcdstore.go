// Package etcdstore is a ShardMapStore and BlobStore on an etcd cluster (API v3), for
// control planes that run more than one controller or already run etcd (Vitess's
// topology, Kubernetes). Records live under <prefix>xs/<namespace>/<database>, blobs under
// <prefix>xb/<key>; the prefix (default "loam/") lets one etcd serve several deployments.
//
// Each record compare-and-set reads the key, checks the next record against the stored one
// (adapters.CheckCAS) and writes in one etcd transaction conditioned on the key's mod
// revision, so a write that raced in between makes the transaction fail and the loser gets
// *adapters.ConflictError with the record that won, read in the same transaction. A blob's
// version is the etcd revision of its last write: revisions are cluster-wide and never
// reused, so a blob deleted and created again never repeats a version.
//
// Watch is etcd's watch, started at the revision just after the read that found nothing
// newer, so no write between the read and the watch is missed; it does not poll.
//
// The store also keeps the controller lease (adapters.LeaseStore): an etcd lease renewed by
// this client, with the lease blob attached to it, so a controller that stops renewing
// loses the lease on etcd's clock; and a Tenure's Fenced view adds "the lease blob still
// has this tenure's revision" to every write's transaction, so a deposed controller's late
// write is refused by etcd itself, atomically with the write.
//
// Every call runs under a deadline (Options.Timeout, default 5s) unless the caller's is
// sooner: a cluster without quorum answers nothing, and without one a call would wait for
// it forever. Such failures match adapters.ErrUnreachable; the write may still commit once
// quorum returns, which the next compare-and-set discovers as a conflict.
package etcdstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"loam.dev/router/adapters"
)

// DefaultPrefix is where the store's keys live when Options.Prefix is empty.
const DefaultPrefix = "loam/"

// DefaultTimeout bounds each call when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Options configure Open.
type Options struct {
	// Endpoints are the members' client URLs, e.g. https://10.0.0.1:2379.
	Endpoints []string
	// Prefix of every key the store writes (default DefaultPrefix). It must end in '/'.
	Prefix string
	// TLS, when set, is used for every connection (endpoints must then be https://).
	TLS *tls.Config
	// Username and Password authenticate to etcd (its auth must be enabled for them to
	// matter). Take them from the environment, never from a file in the repository.
	Username, Password string
	// Timeout bounds each call (default DefaultTimeout); DialTimeout the first connection
	// (default the same).
	Timeout, DialTimeout time.Duration
	// Logger receives the etcd client's own logs (default: none).
	Logger *zap.Logger
}

// Store is safe for concurrent use.
type Store struct {
	cl        *clientv3.Client
	prefix    string
	timeout   time.Duration
	endpoints string
	own       bool // Close closes cl
	closed    atomic.Bool
}

var (
	_ adapters.ShardMapStore = (*Store)(nil)
	_ adapters.BlobStore     = (*Store)(nil)
	_ adapters.LeaseStore    = (*Store)(nil)
)

func checkPrefix(p string) (string, error) {
	if p == "" {
		return DefaultPrefix, nil
	}
	if !strings.HasSuffix(p, "/") || strings.ContainsAny(p, "\x00") {
		return "", fmt.Errorf("etcdstore: prefix %q must end in '/' and hold no NUL (e.g. %q)", p, DefaultPrefix)
	}
	return p, nil
}

// Open connects to the cluster. It does not wait for a member to answer: the first call
// reports an unreachable cluster.
func Open(opts Options) (*Store, error) {
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no endpoints given (e.g. http://127.0.0.1:2379)")
	}
	for _, e := range opts.Endpoints {
		if opts.TLS != nil && strings.HasPrefix(e, "http://") {
			return nil, fmt.Errorf("etcdstore: endpoint %q is http:// but TLS is configured; use https://", e)
		}
	}
	prefix, err := checkPrefix(opts.Prefix)
	if err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dial := opts.DialTimeout
	if dial <= 0 {
		dial = timeout
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: opts.Endpoints, TLS: opts.TLS, Username: opts.Username, Password: opts.Password,
		DialTimeout: dial, DialKeepAliveTime: timeout, DialKeepAliveTimeout: timeout, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connecting to %v: %w", opts.Endpoints, err)
	}
	s := New(cl, prefix, timeout)
	s.own = true
	return s, nil
}

// New wraps a client the caller owns (Close leaves it open). prefix "" means
// DefaultPrefix; timeout 0 means DefaultTimeout.
func New(cl *clientv3.Client, prefix string, timeout time.Duration) *Store {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Store{cl: cl, prefix: prefix, timeout: timeout, endpoints: strings.Join(cl.Endpoints(), ",")}
}

// Close ends the store; later calls return adapters.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.own {
		return s.cl.Close()
	}
	return nil
}

// call bounds one call by the store's timeout, unless ctx ends sooner.
func (s *Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.timeout)
}

// begin refuses a call on a closed store or an ended context.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return adapters.ErrClosed
	}
	return nil
}

// mapErr turns a client error into the seams' errors: the caller's own cancellation as
// is, a closed store as ErrClosed, no answer or no quorum as ErrUnreachable, refused
// credentials with the fix.
func (s *Store) mapErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if s.closed.Load() {
		return adapters.ErrClosed
	}
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrAuthFailed),
		errors.Is(err, rpctypes.ErrUserNotFound), errors.Is(err, rpctypes.ErrUserEmpty):
		return fmt.Errorf("etcdstore: %s on %s: %w (check the store's username and password, and that the user's role may read and write %q)", op, s.endpoints, err, s.prefix)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return fmt.Errorf("etcdstore: %s on %s: %w: no answer within %v (is a quorum of members up?)", op, s.endpoints, adapters.ErrUnreachable, s.timeout)
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return fmt.Errorf("etcdstore: %s on %s: %w: %v", op, s.endpoints, adapters.ErrUnreachable, err)
	case codes.Unknown:
		// A member that cannot commit (no quorum) gives up when the request's deadline,
		// passed to it, ends, and answers with the context's error as code Unknown.
		if m := status.Convert(err).Message(); m == context.DeadlineExceeded.Error() || m == context.Canceled.Error() {
			return fmt.Errorf("etcdstore: %s on %s: %w: no quorum within %v (is a quorum of members up?): %v", op, s.endpoints, adapters.ErrUnreachable, s.timeout, err)
		}
	}
	if ev := rpctypes.Error(err); ev != nil {
		if e, ok := ev.(rpctypes.EtcdError); ok && (e.Code() == codes.Unavailable || e.Code() == codes.DeadlineExceeded) {
			return fmt.Errorf("etcdstore: %s on %s: %w: %v", op, s.endpoints, adapters.ErrUnreachable, err)
		}
	}
	return fmt.Errorf("etcdstore: %s on %s: %w", op, s.endpoints, err)
}

func (s *Store) recordKey(db adapters.DBRef) string { return s.prefix + db.Key() }
func (s *Store) blobKey(key string) string          { return s.prefix + "xb/" + key }

// PrefixOf returns the prefix s keeps its keys under.
func PrefixOf(s *Store) string { return s.prefix }
