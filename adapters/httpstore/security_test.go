package httpstore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance/tlstest"
	"loam.dev/router/kernel/shardmap"
)

// post sends one raw call, as an attacker would, and returns the status and body.
func post(t *testing.T, url, op string, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/"+op, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestRefusals: each request a browser, a rebinding page or a client without the right
// credential can send is refused before the store sees it, with a status and a message that
// say why; the blob is unchanged afterwards.
func TestRefusals(t *testing.T) {
	st := memstore.New()
	_, err := st.PutBlob(t.Context(), "k", 0, []byte("orig"))
	require.NoError(t, err)
	opts := withToken(&httpstore.Options{Hosts: []string{"store.test:80"}, MaxBody: 1024})
	srv := httptest.NewServer(httpstore.Handler(st, opts))
	defer srv.Close()
	good := map[string]string{"Authorization": "Bearer " + testToken, "Host": "store.test:80"}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range good {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	put := `{"key":"k","expect":1,"data":"ZXZpbA=="}`
	for _, tc := range []struct {
		name   string
		op     string
		body   string
		header map[string]string
		status int
		msg    string
	}{
		{"no credential", "put", put, with("Authorization", ""), 401, "missing or wrong credential"},
		{"wrong credential", "put", put, with("Authorization", "Bearer nope"), 401, "missing or wrong credential"},
		{"token in the URL", "put?token=" + testToken, put, with("Authorization", ""), 400, "never accepted in a URL"},
		{"cross-origin", "put", put, with("Origin", "https://evil.example"), 403, "Origin header"},
		{"wrong Host", "put", put, with("Host", "evil.example:80"), 403, "not a name this server listens as"},
		{"form post", "put", put, with("Content-Type", "application/x-www-form-urlencoded"), 415, "send application/json"},
		{"text/plain", "put", put, with("Content-Type", "text/plain"), 415, "send application/json"},
		{"oversized body", "put", `{"key":"k","expect":1,"data":"` + strings.Repeat("A", 2048) + `"}`, good, 413, "larger than the server's bound of 1024 bytes"},
		{"not JSON", "put", `{`, good, 400, "not JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, srv.URL, tc.op, tc.body, tc.header)
			require.Equal(t, tc.status, status, body)
			require.Contains(t, body, tc.msg)
			b, err := st.GetBlob(t.Context(), "k")
			require.NoError(t, err)
			require.Equal(t, "orig", string(b.Data), "the blob changed")
		})
	}
	// The same put with every defence passed goes through (the refusals above are the
	// defences', not a broken request).
	status, body := post(t, srv.URL, "put", put, good)
	require.Equal(t, 200, status, body)
	b, _ := st.GetBlob(t.Context(), "k")
	require.Equal(t, "evil", string(b.Data))
}

// TestServerWithoutCredentialsRefusesAll: a server given no credential is not open.
func TestServerWithoutCredentialsRefusesAll(t *testing.T) {
	srv := httptest.NewServer(httpstore.Handler(memstore.New(), nil))
	defer srv.Close()
	c, err := httpstore.Dial(srv.URL, &httpstore.Options{Token: "anything"})
	require.NoError(t, err)
	_, err = c.ListBlobs(t.Context(), "")
	require.ErrorIs(t, err, httpstore.ErrUnauthenticated)
	require.ErrorContains(t, err, "no credentials configured")
}

// TestAuthorize: the server asks Authorize with the caller's identity and the call; a
// refusal reaches the client as ErrForbidden with the reason, a rewrite of the data is what
// is stored.
func TestAuthorize(t *testing.T) {
	st := memstore.New()
	var seen []string
	opts := &httpstore.Options{
		Credentials: []httpstore.Credential{{Name: "ops", Role: httpstore.RoleOperator, Token: "op-token"}, {Name: "ctl", Role: httpstore.RoleController, Token: "ctl-token"}},
		Authorize: func(id httpstore.Identity, a *httpstore.Access) error {
			seen = append(seen, fmt.Sprintf("%s %s %s", id.Name, a.Op, a.Key))
			if a.Write() && strings.HasPrefix(a.Key, "lease/") && id.Role != httpstore.RoleController {
				return errors.New("only a controller writes lease/")
			}
			if a.Op == "put" {
				a.Data = append([]byte(id.Name+":"), a.Data...)
			}
			return nil
		},
	}
	srv := httptest.NewServer(httpstore.Handler(st, opts))
	defer srv.Close()
	op, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: "op-token"})
	ctl, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: "ctl-token"})
	_, err := op.PutBlob(t.Context(), "lease/controller", 0, []byte("x"))
	require.ErrorIs(t, err, httpstore.ErrForbidden)
	require.ErrorContains(t, err, "only a controller writes lease/")
	require.ErrorContains(t, err, "ops (operator)")
	_, err = st.GetBlob(t.Context(), "lease/controller")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	_, err = ctl.PutBlob(t.Context(), "lease/controller", 0, []byte("x"))
	require.NoError(t, err)
	b, err := st.GetBlob(t.Context(), "lease/controller")
	require.NoError(t, err)
	require.Equal(t, "ctl:x", string(b.Data))
	require.Equal(t, []string{"ops put lease/controller", "ctl put lease/controller"}, seen)
}

// TestListPages: a listing larger than a page comes back whole, in key order, through
// pages; a request asking for a huge page gets the server's page size.
func TestListPages(t *testing.T) {
	st := memstore.New()
	for i := range 50 {
		_, err := st.PutBlob(t.Context(), fmt.Sprintf("p/%03d", i), 0, []byte("x"))
		require.NoError(t, err)
	}
	opts := withToken(&httpstore.Options{PageSize: 7})
	srv := httptest.NewServer(httpstore.Handler(st, opts))
	defer srv.Close()
	c, _ := httpstore.Dial(srv.URL, opts)
	bs, err := c.ListBlobs(t.Context(), "p/")
	require.NoError(t, err)
	require.Len(t, bs, 50)
	for i, b := range bs {
		require.Equal(t, fmt.Sprintf("p/%03d", i), b.Key)
	}
	status, body := post(t, srv.URL, "list", `{"prefix":"p/","limit":1000000000}`, map[string]string{"Authorization": "Bearer " + testToken})
	require.Equal(t, 200, status)
	var page struct {
		Blobs []json.RawMessage `json:"blobs"`
		More  bool              `json:"more"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Len(t, page.Blobs, 7)
	require.True(t, page.More)
}

// TestResponseTooLarge: an answer larger than the client's bound is an error that says so.
func TestResponseTooLarge(t *testing.T) {
	st := memstore.New()
	_, err := st.PutBlob(t.Context(), "big", 0, bytes.Repeat([]byte("x"), 4096))
	require.NoError(t, err)
	c := serve(t, st, &httpstore.Options{MaxResponse: 1024})
	_, err = c.GetBlob(t.Context(), "big")
	require.ErrorIs(t, err, httpstore.ErrTooLarge)
	require.ErrorContains(t, err, "larger than this client's bound of 1024 bytes")
}

// blocking is a store whose GetBlob of "block" waits until released.
type blocking struct {
	httpstore.Store
	entered, release chan struct{}
}

func (b *blocking) GetBlob(ctx context.Context, key string) (adapters.Blob, error) {
	if key == "block" {
		b.entered <- struct{}{}
		<-b.release
	}
	return b.Store.GetBlob(ctx, key)
}

// TestBusy: a call over the server's cap of concurrent calls is answered at once with
// ErrBusy instead of queued, and the slot is given back when the call ends.
func TestBusy(t *testing.T) {
	st := &blocking{Store: memstore.New(), entered: make(chan struct{}), release: make(chan struct{})}
	opts := withToken(&httpstore.Options{MaxConcurrent: 1})
	srv := httptest.NewServer(httpstore.Handler(st, opts))
	defer srv.Close()
	c, _ := httpstore.Dial(srv.URL, opts)
	held := make(chan error, 1)
	go func() { _, err := c.GetBlob(t.Context(), "block"); held <- err }()
	<-st.entered // the one slot is taken
	_, err := c.GetBlob(t.Context(), "k")
	require.ErrorIs(t, err, httpstore.ErrBusy)
	require.ErrorContains(t, err, "1 calls are running, the server's cap")
	close(st.release)
	require.ErrorIs(t, <-held, adapters.ErrNotFound)
	_, err = c.GetBlob(t.Context(), "k")
	require.ErrorIs(t, err, adapters.ErrNotFound, "the slot is given back when the call ends")
}

// TestSilentPeer: a peer that accepts the connection and never answers fails the call at
// the client's deadline (CallTimeout) instead of holding it.
func TestSilentPeer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	c, err := httpstore.Dial("http://"+l.Addr().String(), &httpstore.Options{Token: testToken, CallTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = c.PutBlob(context.Background(), "lease/controller", 0, []byte("x"))
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, adapters.ErrUnreachable), "%v", err)
}

// TestSlowBody: a client that sends its body slower than the server's ReadTimeout is cut
// off, and its call is not run.
func TestSlowBody(t *testing.T) {
	st := memstore.New()
	opts := withToken(&httpstore.Options{ReadTimeout: 300 * time.Millisecond})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = httpstore.NewServer(httpstore.Handler(st, opts), opts)
	srv.Start()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	body := `{"key":"slow","data":"eA=="}`
	_, err = fmt.Fprintf(conn, "POST /v1/put HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", testToken, len(body))
	require.NoError(t, err)
	var werr error
	for i := 0; i < len(body) && werr == nil; i++ {
		_, werr = conn.Write([]byte{body[i]})
		time.Sleep(50 * time.Millisecond)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, _ := io.ReadAll(conn)
	require.NotContains(t, string(rest), "200 OK", "the slow request was answered as if read")
	_, err = st.GetBlob(t.Context(), "slow")
	require.ErrorIs(t, err, adapters.ErrNotFound, "a request cut off by the read timeout wrote")
}

// TestTLS: a client with the server's CA speaks TLS; one without it is refused by the
// certificate check; with mutual TLS the client certificate's common name is the identity
// and a client without a certificate cannot connect.
func TestTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "loam test CA")
	certFile, keyFile := ca.Server("store")
	certs, err := httpstore.LoadCertFiles(certFile, keyFile)
	require.NoError(t, err)
	var who []string
	opts := &httpstore.Options{
		Credentials: []httpstore.Credential{{Name: "ops-cert", Role: httpstore.RoleOperator, CertCN: "ops.loam"}, {Name: "tok", Role: httpstore.RoleOperator, Token: testToken}},
		Authorize:   func(id httpstore.Identity, a *httpstore.Access) error { who = append(who, id.Name); return nil },
	}
	for _, mtls := range []bool{false, true} {
		t.Run(fmt.Sprintf("mtls=%v", mtls), func(t *testing.T) {
			who = nil
			clientCA := ""
			if mtls {
				clientCA = ca.File
			}
			conf, err := httpstore.ServerTLS(certs, clientCA)
			require.NoError(t, err)
			l, err := tls.Listen("tcp", "127.0.0.1:0", conf)
			require.NoError(t, err)
			hs := httpstore.NewServer(httpstore.Handler(memstore.New(), opts), opts)
			go func() { _ = hs.Serve(l) }()
			defer hs.Close()
			srv := struct{ URL string }{"https://" + l.Addr().String()}

			// No CA: the server's certificate is not trusted.
			bare, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: testToken})
			_, err = bare.ListBlobs(t.Context(), "")
			require.ErrorContains(t, err, "certificate")

			cc, ck := "", ""
			if mtls {
				cc, ck = ca.Client("ops.loam")
			}
			tlsConf, err := httpstore.ClientTLS(ca.File, cc, ck)
			require.NoError(t, err)
			good, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: testToken, TLSConfig: tlsConf})
			_, err = good.ListBlobs(t.Context(), "")
			require.NoError(t, err)
			if mtls {
				require.Equal(t, []string{"ops-cert"}, who, "the certificate is the identity")
				noCert, err := httpstore.ClientTLS(ca.File, "", "")
				require.NoError(t, err)
				anon, _ := httpstore.Dial(srv.URL, &httpstore.Options{Token: testToken, TLSConfig: noCert})
				_, err = anon.ListBlobs(t.Context(), "")
				require.Error(t, err, "a client without a certificate got through mutual TLS")
			} else {
				require.Equal(t, []string{"tok"}, who)
			}
		})
	}
}

// TestLargestRequestsFit: the largest legitimate request, a CAS of a 256-shard record,
// fits DefaultMaxBody with a margin of more than 16.
func TestLargestRequestsFit(t *testing.T) {
	backends := make([]shardmap.Backend, 256)
	for i := range backends {
		backends[i] = shardmap.Backend{Host: fmt.Sprintf("shard-%03d.db.internal.example.com", i), Port: 5432, Database: "app"}
	}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, backends...)
	rec.Generation = 1
	enc, err := rec.MarshalBinary()
	require.NoError(t, err)
	req, err := json.Marshal(map[string]any{"namespace": "default", "database": "app", "expect": 1, "record": enc})
	require.NoError(t, err)
	t.Logf("a 256-shard record is %d bytes, %d as a CAS request; the bound is %d", len(enc), len(req), httpstore.DefaultMaxBody)
	require.Less(t, 16*len(req), httpstore.DefaultMaxBody)
	c := serve(t, memstore.New(), nil)
	_, err = c.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, rec)
	require.NoError(t, err)
}
