package httpstore_test

import (
	"crypto/tls"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/tlstest"
)

// BenchmarkCASOverHTTP interleaves a CAS on a bolt file directly and one on another bolt
// file behind a loopback server, and reports both rates and the cost ratio of the network hop.
func BenchmarkCASOverHTTP(b *testing.B) {
	ctx := b.Context()
	direct, err := boltstore.Open(filepath.Join(b.TempDir(), "direct.db"), nil)
	require.NoError(b, err)
	defer direct.Close()
	behind, err := boltstore.Open(filepath.Join(b.TempDir(), "served.db"), nil)
	require.NoError(b, err)
	defer behind.Close()
	opts := withToken(nil)
	srv := httptest.NewServer(httpstore.Handler(behind, opts))
	defer srv.Close()
	c, err := httpstore.Dial(srv.URL, opts)
	require.NoError(b, err)
	defer c.Close()
	db := adapters.DBRef{Namespace: "bench", Database: "app"}
	stores := [2]adapters.ShardMapStore{direct, c}
	var vers [2]uint64
	var spent [2]time.Duration
	rec := conformance.SampleRecord("app", 1)
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range stores {
			t0 := time.Now()
			v, err := s.CAS(ctx, db, vers[i], rec)
			spent[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			vers[i] = v
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/spent[0].Seconds(), "bolt-CAS/s")
	b.ReportMetric(n/spent[1].Seconds(), "http-CAS/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "http/bolt")
}

// BenchmarkCASOverTLS interleaves a CAS through a plain-HTTP server and one through a TLS
// server (TLS 1.3, a P-256 certificate, connections kept alive as the client does), each
// over its own store, and reports both rates and the cost ratio of TLS: over memory (the
// protocol's own cost) and over a bolt file (a deployment's, where the fsync dominates).
func BenchmarkCASOverTLS(b *testing.B) {
	for _, backing := range []string{"mem", "bolt"} {
		b.Run(backing, func(b *testing.B) { benchTLS(b, backing) })
	}
}

func benchTLS(b *testing.B, backing string) {
	ctx := b.Context()
	ca := tlstest.NewCA(b, "bench CA")
	certFile, keyFile := ca.Server("store")
	certs, err := httpstore.LoadCertFiles(certFile, keyFile)
	require.NoError(b, err)
	srvConf, err := httpstore.ServerTLS(certs, "")
	require.NoError(b, err)
	cliConf, err := httpstore.ClientTLS(ca.File, "", "")
	require.NoError(b, err)
	opts := withToken(nil)
	var clients [2]*httpstore.Client
	for i := range clients {
		var st httpstore.Store = memstore.New()
		if backing == "bolt" {
			bs, err := boltstore.Open(filepath.Join(b.TempDir(), "served.db"), nil)
			require.NoError(b, err)
			defer bs.Close()
			st = bs
		}
		srv := httptest.NewUnstartedServer(httpstore.Handler(st, opts))
		url := "http://"
		if i == 1 {
			srv.Listener = tls.NewListener(srv.Listener, srvConf)
			url = "https://"
		}
		srv.Start()
		defer srv.Close()
		o := *opts
		if i == 1 {
			o.TLSConfig = cliConf
		}
		c, err := httpstore.Dial(url+srv.Listener.Addr().String(), &o)
		require.NoError(b, err)
		defer c.Close()
		clients[i] = c
	}
	db := adapters.DBRef{Namespace: "bench", Database: "app"}
	var vers [2]uint64
	var spent [2]time.Duration
	rec := conformance.SampleRecord("app", 1)
	b.ReportAllocs()
	for b.Loop() {
		for i, c := range clients {
			t0 := time.Now()
			v, err := c.CAS(ctx, db, vers[i], rec)
			spent[i] += time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			vers[i] = v
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/spent[0].Seconds(), "http-CAS/s")
	b.ReportMetric(n/spent[1].Seconds(), "https-CAS/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "tls/plain")
}
