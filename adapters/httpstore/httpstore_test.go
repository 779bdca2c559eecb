package httpstore_test

import (
	"context"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance"
)

// testToken is the credential of the tests' servers (made up for the test; not a secret).
const testToken = "test-token-0123456789"

// withToken returns opts (or new options) with a controller credential the server accepts
// and the client sends.
func withToken(opts *httpstore.Options) *httpstore.Options {
	o := httpstore.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Token == "" {
		o.Token = testToken
	}
	if o.Credentials == nil {
		o.Credentials = []httpstore.Credential{{Name: "test", Role: httpstore.RoleController, Token: o.Token}}
	}
	return &o
}

// serve starts a server over s and returns a client of it; both end with the test.
func serve(t conformance.TB, s httpstore.Store, opts *httpstore.Options) *httpstore.Client {
	opts = withToken(opts)
	srv := httptest.NewServer(httpstore.Handler(s, opts))
	t.Cleanup(srv.Close)
	c, err := httpstore.Dial(srv.URL, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestStoreContractOverMemstore: the client passes the store contract with memory behind it.
func TestStoreContractOverMemstore(t *testing.T) {
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(t conformance.TB) conformance.Store { return serve(t, memstore.New(), nil) },
	})
}

// served is a bolt file behind a server, and the client of it.
type served struct {
	bolt *boltstore.Store
	srv  *httptest.Server
	c    *httpstore.Client
	once sync.Once
}

func (s *served) close() {
	s.once.Do(func() {
		_ = s.c.Close()
		s.srv.Close()
		_ = s.bolt.Close()
	})
}

func openServed(t conformance.TB, path string) *served {
	b, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	opts := withToken(&httpstore.Options{WatchWait: 150 * time.Millisecond})
	srv := httptest.NewServer(httpstore.Handler(b, opts))
	c, err := httpstore.Dial(srv.URL, opts)
	require.NoError(t, err)
	s := &served{bolt: b, srv: srv, c: c}
	t.Cleanup(s.close)
	return s
}

// TestStoreContractOverBolt: the client passes the contract with the embedded default
// behind it, with a short server-side watch wait so that watches span several long polls,
// and across a restart of the server on the same file.
func TestStoreContractOverBolt(t *testing.T) {
	var mu sync.Mutex
	open := map[*httpstore.Client]*served{}
	conformance.RunStoreSuite(t, conformance.StoreHarness{
		Open: func(tb conformance.TB) conformance.Store {
			s := openServed(tb, filepath.Join(t.TempDir(), "loam.db"))
			mu.Lock()
			defer mu.Unlock()
			open[s.c] = s
			return s.c
		},
		Reopen: func(tb conformance.TB, st conformance.Store) conformance.Store {
			mu.Lock()
			old := open[st.(*httpstore.Client)]
			mu.Unlock()
			path := old.bolt.Path()
			old.close()
			s := openServed(tb, path)
			mu.Lock()
			defer mu.Unlock()
			open[s.c] = s
			return s.c
		},
	})
}

func TestWrongTokenIsRefused(t *testing.T) {
	srv := httptest.NewServer(httpstore.Handler(memstore.New(), withToken(&httpstore.Options{Token: "right"})))
	defer srv.Close()
	c, err := httpstore.Dial(srv.URL, &httpstore.Options{Token: "wrong"})
	require.NoError(t, err)
	_, err = c.GetBlob(t.Context(), "k")
	require.ErrorContains(t, err, "HTTP 401")
	require.ErrorContains(t, err, "missing or wrong credential")
	require.ErrorIs(t, err, httpstore.ErrUnauthenticated)
}

// TestUnreachableServer: a server that is not there is ErrUnreachable, never ErrNotFound
// (a caller must not conclude that a record does not exist).
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err := httpstore.Dial("http://"+addr, nil)
	require.NoError(t, err)
	_, err = c.Read(t.Context(), adapters.DBRef{Namespace: "ns", Database: "app"})
	require.ErrorIs(t, err, adapters.ErrUnreachable)
	require.False(t, errors.Is(err, adapters.ErrNotFound))
}

// TestCloseEndsWatch: closing the client ends a waiting watch with ErrClosed.
func TestCloseEndsWatch(t *testing.T) {
	c := serve(t, memstore.New(), nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.Watch(context.Background(), adapters.DBRef{Namespace: "ns", Database: "app"}, 0)
		done <- err
	}()
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, c.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, adapters.ErrClosed)
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not end when the client was closed")
	}
}

func TestDialRefusesOtherSchemes(t *testing.T) {
	_, err := httpstore.Dial("127.0.0.1:7070", nil)
	require.ErrorContains(t, err, "must start with http://")
}
